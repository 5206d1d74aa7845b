// Package testkit holds the helpers of this repository's tests, written
// once: waiting for a condition, asking whether a channel is closed, and
// taking, releasing and waiting for locks with the test failed on the
// first surprise. It is for this repository's tests; not for use outside
// it (a backend author's suite is package dlocktest).
package testkit

import (
	"context"
	"testing"
	"time"
)

// Patience is how long Eventually and Retry wait for a condition before
// they fail the test. It is generous on purpose: it bounds only a test
// that is failing anyway, and a loaded 2-core machine can take seconds
// over what an idle one takes.
const Patience = 60 * time.Second

// attemptTimeout bounds one attempt of Retry.
const attemptTimeout = 2 * time.Second

// pollInterval is how often Eventually, Poll and Retry look again.
const pollInterval = 10 * time.Millisecond

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
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
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
// after a few seconds, and fails the test with what and f's last error if
// it does not succeed within Patience. It is for steps against a server
// that is starting, failing over or coming back from a fault.
func Retry(t testing.TB, what string, f func(ctx context.Context) error) {
	t.Helper()
	var err error
	ok := Poll(Patience, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), attemptTimeout)
		defer cancel()
		err = f(ctx)
		return err == nil
	})
	if !ok {
		t.Fatalf("%s: still failing after %v: %v", what, Patience, err)
	}
}
