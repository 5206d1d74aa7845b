package dlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func testTryAcquireExcludes(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name)
	testkit.WantNotAcquired(t, b, name, "while another owner holds it")
	// A fresh context is a different owner, even on the same Locker.
	testkit.WantNotAcquired(t, a, name, "while another owner holds it")
	if testkit.IsClosed(k.Done()) {
		t.Fatalf("Done of %q closed while held", name)
	}
	testkit.MustRelease(t, k)
}

func testReleaseFrees(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name)
	testkit.MustRelease(t, k)
	if !testkit.IsClosed(k.Done()) {
		t.Fatalf("Done of %q open after Release, want closed", name)
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrReleased) {
		t.Fatalf("context.Cause after Release = %v, want ErrReleased", cause)
	}
	k2 := testkit.MustTryAcquire(t, b, name)
	testkit.MustRelease(t, k2)
}

func testReleaseTwice(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name)
	testkit.MustRelease(t, k)
	k2 := testkit.MustTryAcquire(t, b, name)
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Release(%q) = %v, want ErrNotHeld", name, err)
	}
	if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Refresh(%q) after Release = %v, want ErrNotHeld", name, err)
	}
	testkit.WantNotAcquired(t, a, name, "while another owner holds it") // b's lock survived the late Release
	testkit.MustRelease(t, k2)
}

func testMutualExclusion(t *testing.T, h Harness) {
	const lockers, goroutines, rounds = 3, 4, 25
	name := uniqueName(t, "")
	var (
		counter atomic.Int64 // read and written separately: a lost update shows
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
		errs    = make(chan error, lockers*goroutines)
	)
	for range lockers {
		l := newLocker(t, h)
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					k, err := l.Acquire(t.Context(), name)
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					v := counter.Load()
					counter.Store(v + 1)
					inside.Add(-1)
					if err := k.Release(t.Context()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Acquire/Release(%q) = %v, want nil", name, err)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d critical sections overlapped, want 0", n)
	}
	if got, want := counter.Load(), int64(lockers*goroutines*rounds); got != want {
		t.Errorf("counter = %d, want %d (lost updates)", got, want)
	}
}

func testNamesIndependent(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	base := uniqueName(t, "")
	names := []string{base, base + "/x", "{" + base + "}", base + "{x}", base + " x", base + "/ü", base + "%7B"}
	held := make([]*dlock.Lock, len(names))
	for i, n := range names {
		held[i] = testkit.MustTryAcquire(t, a, n)
	}
	for _, n := range names {
		testkit.WantNotAcquired(t, b, n, "while another owner holds it")
	}
	other := testkit.MustTryAcquire(t, b, base+"-other")
	testkit.MustRelease(t, other)
	for i, k := range held {
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("Done of %q closed by activity on other names", names[i])
		}
		testkit.MustRelease(t, k)
		// Only this name became free.
		k2 := testkit.MustTryAcquire(t, b, names[i])
		for _, n := range names[i+1:] {
			testkit.WantNotAcquired(t, b, n, "while another owner holds it")
		}
		testkit.MustRelease(t, k2)
	}
}

func testReentrancy(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, other := uniqueName(t, ""), uniqueName(t, "-other")
	outer := testkit.MustTryAcquire(t, a, name)
	inner, err := a.Acquire(outer.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(outer.Context(), %q) = %v, want re-entry", name, err)
	}
	if inner.Fence() != outer.Fence() {
		t.Fatalf("re-entered Fence = %d, want %d (the outer token)", inner.Fence(), outer.Fence())
	}
	innermost, err := a.TryAcquire(inner.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(inner.Context(), %q) = %v, want re-entry", name, err)
	}
	// Nesting through another name keeps the owner.
	side, err := a.TryAcquire(innermost.Context(), other)
	if err != nil {
		t.Fatalf("TryAcquire(innermost.Context(), %q) = %v, want a lock", other, err)
	}
	again, err := a.TryAcquire(side.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(side.Context(), %q) = %v, want re-entry through another name's context", name, err)
	}
	for _, k := range []*dlock.Lock{again, innermost, inner} {
		testkit.MustRelease(t, k)
		if !testkit.IsClosed(k.Done()) {
			t.Fatalf("Done of a released re-entered handle is open, want closed")
		}
		if testkit.IsClosed(outer.Done()) {
			t.Fatalf("outer Done closed by an inner Release, want open")
		}
		testkit.WantNotAcquired(t, b, name, "while another owner holds it")
	}
	testkit.MustRelease(t, side)
	testkit.MustRelease(t, outer)
	k := testkit.MustTryAcquire(t, b, name)
	if k.Fence() <= outer.Fence() {
		t.Fatalf("next holder's Fence = %d, want > %d", k.Fence(), outer.Fence())
	}
	// A context from another Locker does not re-enter.
	if _, err := a.TryAcquire(k.Context(), name); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with another Locker's lock context = %v, want ErrNotAcquired", err)
	}
	testkit.MustRelease(t, k)
}

func testFencing(t *testing.T, h Harness) {
	lockers := []*dlock.Locker{newLocker(t, h), newLocker(t, h)}
	name := uniqueName(t, "")
	var last uint64
	for i := range 10 {
		k := testkit.MustTryAcquire(t, lockers[i%2], name)
		if k.Fence() <= last {
			t.Fatalf("holder %d: Fence = %d, want > %d", i, k.Fence(), last)
		}
		last = k.Fence()
		testkit.MustRelease(t, k)
	}
	// After a lease expires rather than being released.
	ttl := h.ttl()
	k := testkit.MustTryAcquire(t, lockers[0], name, dlock.WithTTL(ttl), dlock.WithoutRenewal())
	if k.Fence() <= last {
		t.Fatalf("Fence = %d, want > %d", k.Fence(), last)
	}
	next, err := lockers[1].Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(%q) after expiry = %v, want a lock", name, err)
	}
	if next.Fence() <= k.Fence() {
		t.Fatalf("Fence after expiry = %d, want > %d", next.Fence(), k.Fence())
	}
	testkit.MustRelease(t, next)
}
