package dlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// remaining is name's lease left on store, as Inspect reports it.
func remaining(t *testing.T, store *memlock.Store, name string) time.Duration {
	t.Helper()
	l := dlock.NewLocker(store.Driver(), driver.LockerOptions{})
	defer l.Close()
	infos, err := l.Inspect(t.Context(), name)
	if err != nil || len(infos) != 1 {
		t.Fatalf("Inspect(%q) = %v, %v; want one holder", name, infos, err)
	}
	return infos[0].Remaining
}

// Extend shorter and longer: the store's lease, Deadline and the
// renewals' cadence all follow the new TTL.
func TestExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, d := newFaulty(store, true)
		defer l.Close()
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(30*time.Second))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		for _, ttl := range []time.Duration{3 * time.Second, time.Minute} {
			sent := time.Now()
			if err := k.Extend(t.Context(), ttl); err != nil {
				t.Fatalf("Extend(%v) = %v", ttl, err)
			}
			if got := remaining(t, store, "a"); got != ttl {
				t.Errorf("after Extend(%v) the store's lease is %v", ttl, got)
			}
			if got, want := k.Deadline(), sent.Add(ttl-ttl/10); !got.Equal(want) {
				t.Errorf("after Extend(%v) Deadline is %v from now, want %v", ttl, time.Until(got), time.Until(want))
			}
			d.mu.Lock()
			before := len(d.refreshTimes)
			d.mu.Unlock()
			time.Sleep(ttl + ttl/12)
			d.mu.Lock()
			n := len(d.refreshTimes) - before
			d.mu.Unlock()
			if n != 3 {
				t.Errorf("%d renewals in the first %v after Extend(%v), want 3 (every TTL/3)", n, ttl+ttl/12, ttl)
			}
			if testkit.IsClosed(k.Done()) {
				t.Fatalf("lock lost after Extend(%v): %v", ttl, context.Cause(k.Context()))
			}
		}
	})
}

// The adversary is a renewal sent with the old TTL that lands on the
// store after Extend's step (it would set the lease back to the old
// length while the core counts on the new one): Extend waits for a
// renewal under way before it sends its own step.
func TestExtendWaitsForRenewalUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, d := newFaulty(store, true)
		defer l.Close()
		d.refreshDelay = 500 * time.Millisecond
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		time.Sleep(time.Second + 100*time.Millisecond) // a renewal is under way
		if err := k.Extend(t.Context(), 10*time.Second); err != nil {
			t.Fatalf("Extend = %v", err)
		}
		d.mu.Lock()
		steps := slices.Clone(d.steps)
		d.mu.Unlock()
		want := []string{"refresh", "refreshed", "extend"}
		if !slices.Equal(steps, want) {
			t.Errorf("steps = %v, want %v", steps, want)
		}
		if got := remaining(t, store, "a"); got != 10*time.Second {
			t.Errorf("the store's lease is %v after Extend(10s)", got)
		}
	})
}

// Bad input and states: a TTL out of range, a released handle, a lock
// taken by another owner meanwhile, a backend without Extend.
func TestExtendErrors(t *testing.T) {
	store := memlock.NewStore()
	l := dlock.NewLocker(store.Driver(), driver.LockerOptions{})
	defer l.Close()
	k := testkit.MustTryAcquire(t, l, "a")
	for _, ttl := range []time.Duration{0, time.Millisecond, 25 * time.Hour} {
		if err := k.Extend(t.Context(), ttl); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Extend(%v) = %v, want ErrInvalid", ttl, err)
		}
	}
	if _, err := l.ForceRelease(t.Context(), "a"); err != nil {
		t.Fatalf("ForceRelease = %v", err)
	}
	other := testkit.MustTryAcquire(t, l, "a")
	if err := k.Extend(t.Context(), time.Minute); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Extend of a lock taken over = %v, want ErrNotHeld", err)
	}
	if !testkit.IsClosed(k.Done()) {
		t.Errorf("Done still open after Extend found the lock taken over")
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if err := other.Extend(t.Context(), time.Minute); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Extend of a released handle = %v, want ErrNotHeld", err)
	}
	plain := dlock.NewLocker(struct{ driver.Driver }{store.Driver()}, driver.LockerOptions{})
	defer plain.Close()
	k3 := testkit.MustTryAcquire(t, plain, "b")
	if err := k3.Extend(t.Context(), time.Minute); !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("Extend on a backend without it = %v, want ErrUnsupported", err)
	}
}

// Resume through the Context of a lock on the same name would give one
// owner two holds of a name: refused with ErrInvalid, nothing taken.
func TestResumeInsideOwnHold(t *testing.T) {
	l, _ := memlock.New(nil)
	defer l.Close()
	k := testkit.MustTryAcquire(t, l, "a")
	if _, err := l.Resume(k.Context(), k.Token()); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Resume inside the hold it names = %v, want ErrInvalid", err)
	}
	if err := k.Refresh(t.Context()); err != nil {
		t.Errorf("the hold's Refresh after the refused Resume = %v", err)
	}
	r, err := l.Resume(t.Context(), k.Token())
	if err != nil {
		t.Fatalf("Resume from a plain context = %v", err)
	}
	testkit.MustRelease(t, r)
}
