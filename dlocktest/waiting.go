package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// promptly bounds wake-ups in tests: far above a few round trips, far
// below the 30 s lease a poller would wait out, and below
// driver.DefaultMaxRetryInterval, the fallback of a lost wake-up.
const promptly = time.Second

func testAcquireWoken(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name) // default 30 s lease
	starts := testkit.WatchStarts(b)
	got := testkit.AcquireAsync(t.Context(), b, name)
	starts.WaitInAcquire(t, name, 1)
	select {
	case r := <-got:
		t.Fatalf("Acquire(%q) returned (%v) while another owner held it", name, r.Err)
	default:
	}
	testkit.MustRelease(t, k)
	released := time.Now()
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", name, r.Err)
		}
		t.Logf("woken %v after Release returned", r.At.Sub(released))
		if r.Lock.Fence() <= k.Fence() {
			t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), k.Fence())
		}
		testkit.MustRelease(t, r.Lock)
	case <-time.After(promptly):
		t.Fatalf("Acquire(%q) still waiting %v after Release, want woken promptly", name, promptly)
	}
}

func testAcquireContext(t *testing.T, h Harness) {
	a, b, c := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name)

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
	starts := testkit.WatchStarts(b)
	got := testkit.AcquireAsync(ctx, b, name)
	starts.WaitInAcquire(t, name, 1)
	cancel()
	cancelled := time.Now()
	select {
	case r := <-got:
		if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled Acquire(%q) = %v, want context.Canceled", name, r.Err)
		}
		if d := r.At.Sub(cancelled); d > promptly {
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
	testkit.MustRelease(t, k)
	k3 := testkit.MustTryAcquire(t, c, name)
	testkit.MustRelease(t, k3)
	k4 := testkit.MustTryAcquire(t, b, name)
	testkit.MustRelease(t, k4)
}
