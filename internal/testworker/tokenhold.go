package testworker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TokenHold is a worker for any backend, for Lock.Token and lock-delay
// tests, registered as "tokenhold": args are a store URL (its backend
// must be imported by the test package), a lock name, a TTL and a
// lock-delay (0s for none). It takes the lock (renewed) and prints
// "token TOKEN". When its Done closes it prints "lost UNIXNANO CAUSE"
// (the wall-clock time it saw the loss, and the lock's cause), releases
// and prints "release notheld=BOOL ERR", then exits with status 0. On
// SIGTERM it releases, prints the same "release" line and exits with
// the Release's error.
func TokenHold(ctx context.Context, args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("tokenhold: want STORE NAME TTL DELAY, got %q", args)
	}
	l, name, ttl, err := OpenStore(ctx, "tokenhold", args[:3])
	if err != nil {
		return err
	}
	defer l.Close()
	delay, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	k, err := l.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithLockDelay(delay))
	if err != nil {
		return err
	}
	fmt.Println("token", k.Token())
	lost := false
	select {
	case <-k.Done():
		lost = true
		fmt.Println("lost", time.Now().UnixNano(), context.Cause(k.Context()))
	case <-ctx.Done():
	}
	err = k.Release(context.Background())
	fmt.Printf("release notheld=%t %v\n", errors.Is(err, dlock.ErrNotHeld), err)
	if lost {
		return nil
	}
	return err
}

// StartTokenHold starts a TokenHold worker (registered as "tokenhold")
// on store, and returns it with its lock's token once it holds name.
func StartTokenHold(t testing.TB, store, name string, ttl, delay time.Duration) (*Process, string) {
	t.Helper()
	p := Start(t, "tokenhold", store, name, ttl.String(), delay.String())
	return p, p.Expect(t, "token ", 30*time.Second)
}

// ExpectLost waits up to timeout for a TokenHold worker's "lost" line and
// returns when the worker saw the loss (by its wall clock) and the cause
// it printed.
func ExpectLost(t testing.TB, p *Process, timeout time.Duration) (at time.Time, cause string) {
	t.Helper()
	line := p.Expect(t, "lost ", timeout)
	ns, cause, _ := strings.Cut(line, " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		t.Fatalf("the worker's loss line %q: no time: %v", line, err)
	}
	return time.Unix(0, n), cause
}

// ExpectRelease waits up to timeout for a TokenHold worker's "release"
// line and returns whether its Release got ErrNotHeld, and the error it
// printed ("<nil>" for none).
func ExpectRelease(t testing.TB, p *Process, timeout time.Duration) (notHeld bool, err string) {
	t.Helper()
	line := p.Expect(t, "release notheld=", timeout)
	b, err, _ := strings.Cut(line, " ")
	notHeld, perr := strconv.ParseBool(b)
	if perr != nil {
		t.Fatalf("the worker's release line %q: %v", line, perr)
	}
	return notHeld, err
}

// StopTokenHold signals a TokenHold worker to release its lock and fails
// the test unless its Release succeeds within timeout.
func StopTokenHold(t testing.TB, p *Process, timeout time.Duration) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	if notHeld, err := ExpectRelease(t, p, timeout); notHeld || err != "<nil>" {
		t.Fatalf("the worker's Release on SIGTERM = %s, want <nil>", err)
	}
}

// ResumeFromTokenHold runs the cross-process Resume scenario against a
// TokenHold worker w that holds name with ttl (and no lock-delay) under
// token tok: b resumes the worker's hold from tok, refreshes and
// releases it while the worker still runs, and c takes name. The
// worker's next renewal must report the loss, its late Release must get
// ErrNotHeld, and c's hold must survive it. It returns how long after
// the Resume the worker saw the loss.
func ResumeFromTokenHold(t testing.TB, w *Process, tok string, b, c *dlock.Locker, name string, ttl time.Duration) time.Duration {
	t.Helper()
	const slack = 2 * time.Second
	k, err := b.Resume(t.Context(), tok)
	if err != nil {
		t.Fatalf("Resume(the worker's token) = %v, want a lock", err)
	}
	resumed := time.Now()
	if err := k.Refresh(t.Context()); err != nil {
		t.Errorf("the resumed lock's Refresh = %v, want nil", err)
	}
	testkit.MustRelease(t, k)
	third := testkit.MustTryAcquire(t, c, name, dlock.WithTTL(time.Minute))
	lost, _ := ExpectLost(t, w, ttl+slack)
	if notHeld, err := ExpectRelease(t, w, slack); !notHeld {
		t.Errorf("the worker's Release after the loss = %s, want ErrNotHeld", err)
	}
	if err := third.Refresh(t.Context()); err != nil {
		t.Errorf("the third owner's Refresh after the worker's late Release = %v, want nil", err)
	}
	testkit.MustRelease(t, third)
	return lost.Sub(resumed)
}
