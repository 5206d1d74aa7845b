// Package testkit holds the helpers of this repository's tests, written
// once: waiting for a condition, asking whether a channel is closed, and
// taking, releasing and waiting for locks with the test failed on the
// first surprise. It is for this repository's tests; not for use outside
// it (a backend author's suite is package dlocktest).
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// Patience is how long Eventually and Retry wait for a condition before
// they fail the test. It is generous on purpose: it bounds only a test
// that is failing anyway, and a loaded 2-core machine can take seconds
// over what an idle one takes.
const Patience = 60 * time.Second

// attemptTimeout bounds one attempt of Retry.
const attemptTimeout = 2 * time.Second

// pollInterval is how often Eventually and Poll look again; Retry, whose
// every attempt is a round trip to a server that may be down, waits
// retryInterval between attempts.
const (
	pollInterval  = 10 * time.Millisecond
	retryInterval = 50 * time.Millisecond
)

// IsClosed reports whether ch is closed, without waiting.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Poll calls cond until it returns true or d passes, and reports whether
// it returned true. It is for tests that have something to do or say when
// cond does not hold (kill a process, print the state it reached);
// the others call Eventually.
func Poll(d time.Duration, cond func() bool) bool {
	return poll(d, pollInterval, cond)
}

func poll(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// Eventually calls cond until it returns true, and fails the test with
// what, the fact waited for, if it does not within Patience.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(Patience, cond) {
		t.Fatalf("%s: not true after %v", what, Patience)
	}
}

// Retry calls f until it returns nil, each time with a context that ends
// after a few seconds (not derived from t.Context(), so that Retry works
// in a Cleanup too), and fails the test with what and f's last error if
// it does not succeed within Patience. It is for steps against a server
// that is starting, failing over or coming back from a fault.
func Retry(t testing.TB, what string, f func(ctx context.Context) error) {
	t.Helper()
	var err error
	ok := poll(Patience, retryInterval, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		defer cancel()
		err = f(ctx)
		return err == nil
	})
	if !ok {
		t.Fatalf("%s: still failing after %v: %v", what, Patience, err)
	}
}

// UniqueName returns a lock name that no other test, run or process
// sharing the server uses: prefix, the last element of the test's name
// and random hex, joined by slashes.
func UniqueName(t testing.TB, prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return prefix + "/" + name + "/" + hex.EncodeToString(b[:])
}

// MustOpen opens a Locker on the store url names, with the backend the
// test package imports, or fails the test (the message redacts url's
// password); the Locker is closed when the test ends.
func MustOpen(t testing.TB, url string) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want a Locker", backend.RedactURL(url), err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
