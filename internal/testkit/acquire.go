package testkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Acquired is the outcome of an Acquire started by AcquireAsync.
type Acquired struct {
	Lock *dlock.Lock
	Err  error
	At   time.Time // when Acquire returned
}

// AcquireAsync runs l.Acquire in a goroutine and delivers its outcome on
// the returned channel, for WantWaiting and WantAcquired.
func AcquireAsync(ctx context.Context, l *dlock.Locker, name string, opts ...dlock.Option) <-chan Acquired {
	ch := make(chan Acquired, 1)
	go func() { // exits when Acquire returns
		k, err := l.Acquire(ctx, name, opts...)
		ch <- Acquired{k, err, time.Now()}
	}()
	return ch
}

// WantWaiting fails the test if the Acquire behind got returns within
// 300 ms: it should be waiting for another owner. It can only fail
// wrongly in the safe direction (a slow machine hides a bug, it never
// invents one).
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

// WantError waits up to limit for the Acquire behind got to return, and
// fails the test unless it returned an error wrapping target.
func WantError(t testing.TB, got <-chan Acquired, name string, target error, limit time.Duration) Acquired {
	t.Helper()
	select {
	case r := <-got:
		if r.Lock != nil {
			r.Lock.Release(context.Background())
		}
		if !errors.Is(r.Err, target) {
			t.Fatalf("Acquire(%q) = %v, want an error wrapping %v", name, r.Err, target)
		}
		return r
	case <-time.After(limit):
		t.Fatalf("Acquire(%q) still waiting after %v, want an error wrapping %v", name, limit, target)
		return Acquired{}
	}
}

// MustTryAcquire takes name on l with TryAcquire, or fails the test.
func MustTryAcquire(t testing.TB, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Lock {
	t.Helper()
	k, err := l.TryAcquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	return k
}

// MustAcquire takes name on l with Acquire, waiting while another owner
// holds it, or fails the test.
func MustAcquire(t testing.TB, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Lock {
	t.Helper()
	k, err := l.Acquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
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

// WantNotAcquired fails the test unless TryAcquire of name on l fails
// with dlock.ErrNotAcquired; what says when, for the failure message
// ("while another owner holds it"). A lock it takes by mistake is
// released.
func WantNotAcquired(t testing.TB, l *dlock.Locker, name, what string, opts ...dlock.Option) {
	t.Helper()
	k, err := l.TryAcquire(t.Context(), name, opts...)
	if !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			k.Release(context.Background())
		}
		t.Fatalf("TryAcquire(%q) %s = %v, want ErrNotAcquired", name, what, err)
	}
}

// WantInvalid fails the test unless TryAcquire of name on l with ctx (a
// held lock's Context to test a re-entry) fails with an error wrapping
// dlock.ErrInvalid; what says how it was asked, for the failure message
// ("with another limit"). A lock it takes by mistake is released.
func WantInvalid(t testing.TB, ctx context.Context, l *dlock.Locker, name, what string, opts ...dlock.Option) {
	t.Helper()
	k, err := l.TryAcquire(ctx, name, opts...)
	if !errors.Is(err, dlock.ErrInvalid) {
		if k != nil {
			k.Release(context.Background())
		}
		t.Fatalf("TryAcquire(%q) %s = %v, want an error wrapping ErrInvalid", name, what, err)
	}
}

// Cycle takes name on l with TryAcquire and releases it at once, or fails
// the test, and returns the fencing token the hold had.
func Cycle(t testing.TB, l *dlock.Locker, name string, opts ...dlock.Option) uint64 {
	t.Helper()
	k := MustTryAcquire(t, l, name, opts...)
	MustRelease(t, k)
	return k.Fence()
}
