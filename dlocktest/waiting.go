package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// promptly bounds wake-ups in tests: far above a few round trips, far
// below the 30 s lease a poller would wait out, and below
// dlock.DefaultMaxRetryInterval, the fallback of a lost wake-up.
const promptly = time.Second

type acquired struct {
	k   *dlock.Lock
	err error
	at  time.Time
}

func acquireAsync(ctx context.Context, l *dlock.Locker, name string, opts ...dlock.Option) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		k, err := l.Acquire(ctx, name, opts...)
		ch <- acquired{k, err, time.Now()}
	}()
	return ch
}

func testAcquireWoken(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := mustAcquire(t, a, t.Context(), name) // default 30 s lease
	got := acquireAsync(t.Context(), b, name)
	time.Sleep(200 * time.Millisecond) // let b reach its wait
	select {
	case r := <-got:
		t.Fatalf("Acquire(%q) returned (%v) while another owner held it", name, r.err)
	default:
	}
	mustRelease(t, k)
	released := time.Now()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", name, r.err)
		}
		t.Logf("woken %v after Release returned", r.at.Sub(released))
		if r.k.Fence() <= k.Fence() {
			t.Errorf("waiter's Fence = %d, want > %d", r.k.Fence(), k.Fence())
		}
		mustRelease(t, r.k)
	case <-time.After(promptly):
		t.Fatalf("Acquire(%q) still waiting %v after Release, want woken promptly", name, promptly)
	}
}

func testAcquireContext(t *testing.T, h Harness) {
	a, b, c := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := mustAcquire(t, a, t.Context(), name)

	const timeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()
	if k2, err := b.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		if k2 != nil {
			k2.Release(t.Context())
		}
		t.Fatalf("Acquire(%q) with %v timeout = %v, want context.DeadlineExceeded", name, timeout, err)
	}
	if d := time.Since(start); d > timeout+promptly {
		t.Fatalf("Acquire(%q) returned %v after its %v timeout, want promptly", name, d-timeout, timeout)
	}

	ctx, cancel = context.WithCancel(t.Context())
	got := acquireAsync(ctx, b, name)
	time.Sleep(100 * time.Millisecond)
	cancel()
	cancelled := time.Now()
	select {
	case r := <-got:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled Acquire(%q) = %v, want context.Canceled", name, r.err)
		}
		if d := r.at.Sub(cancelled); d > promptly {
			t.Fatalf("cancelled Acquire(%q) returned %v after cancel, want promptly", name, d)
		}
	case <-time.After(promptly):
		t.Fatalf("cancelled Acquire(%q) still waiting %v after cancel", name, promptly)
	}

	// An already-cancelled context fails before any wait.
	if _, err := b.Acquire(ctx, name); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(%q) with a cancelled context = %v, want context.Canceled", name, err)
	}

	// Nothing was left behind: once the holder releases, a third owner
	// gets the name at once, and the cancelled waiter's Locker still works.
	mustRelease(t, k)
	k3 := mustAcquire(t, c, t.Context(), name)
	mustRelease(t, k3)
	k4 := mustAcquire(t, b, t.Context(), name)
	mustRelease(t, k4)
}
