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

// Acquired is the outcome of an Acquire started by AcquireAsync.
type Acquired struct {
	Lock *dlock.Lock
	Err  error
	At   time.Time // when Acquire returned
}

// AcquireAsync runs l.Acquire in a goroutine and delivers its outcome on
// the returned channel. Tests of backends use it with WantWaiting and
// WantAcquired.
func AcquireAsync(ctx context.Context, l *dlock.Locker, name string, opts ...dlock.Option) <-chan Acquired {
	ch := make(chan Acquired, 1)
	go func() { // exits when Acquire returns
		k, err := l.Acquire(ctx, name, opts...)
		ch <- Acquired{k, err, time.Now()}
	}()
	return ch
}

// WantWaiting fails the test if the Acquire behind got returns within
// 300 ms: it should be waiting for another owner.
func WantWaiting(t testing.TB, got <-chan Acquired, name string) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("Acquire(%q) returned (%v) while another owner held it", name, r.Err)
	case <-time.After(300 * time.Millisecond):
	}
}

// WantAcquired waits up to limit for the Acquire behind got to return a
// lock, and fails the test if it does not.
func WantAcquired(t testing.TB, got <-chan Acquired, name string, limit time.Duration) Acquired {
	t.Helper()
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", name, r.Err)
		}
		return r
	case <-time.After(limit):
		t.Fatalf("Acquire(%q) still waiting after %v", name, limit)
		return Acquired{}
	}
}

func testAcquireWoken(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := mustAcquire(t, a, t.Context(), name) // default 30 s lease
	got := AcquireAsync(t.Context(), b, name)
	time.Sleep(200 * time.Millisecond) // let b reach its wait
	select {
	case r := <-got:
		t.Fatalf("Acquire(%q) returned (%v) while another owner held it", name, r.Err)
	default:
	}
	mustRelease(t, k)
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
		mustRelease(t, r.Lock)
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
	got := AcquireAsync(ctx, b, name)
	time.Sleep(100 * time.Millisecond)
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
	mustRelease(t, k)
	k3 := mustAcquire(t, c, t.Context(), name)
	mustRelease(t, k3)
	k4 := mustAcquire(t, b, t.Context(), name)
	mustRelease(t, k4)
}

// MustTryAcquire takes name on l with TryAcquire, or fails the test.
// Tests of backends use it beside the suite.
func MustTryAcquire(t testing.TB, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Lock {
	t.Helper()
	k, err := l.TryAcquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	return k
}

// MustRelease releases k, or fails the test.
func MustRelease(t testing.TB, k *dlock.Lock) {
	t.Helper()
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
	}
}
