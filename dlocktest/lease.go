package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// slack is the generous allowance for scheduling and round trips in
// bounds on a loaded machine; bounds are correctness bounds, not speed.
const slack = 2 * time.Second

func testLeaseExpires(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	start := time.Now()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl), dlock.WithoutRenewal())
	testkit.WantNotAcquired(t, b, name, "while another owner holds it")
	got := testkit.AcquireAsync(t.Context(), b, name)
	waitClosed(t, k.Done(), ttl+slack, "Done of a WithoutRenewal lock")
	lostAt := time.Now()
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("context.Cause after the lease ended = %v, want ErrLost", cause)
	}
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("Acquire(%q) after expiry = %v, want a lock", name, r.Err)
		}
		if r.At.Before(lostAt) {
			t.Fatalf("another owner acquired %v before the holder's Done closed", lostAt.Sub(r.At))
		}
		// The server lease started after start, so it cannot end before
		// start+ttl; allow the store's millisecond rounding.
		if d := r.At.Sub(start); d < ttl-5*time.Millisecond {
			t.Fatalf("another owner acquired %v after the acquisition, before the %v lease ended", d, ttl)
		}
		testkit.MustRelease(t, r.Lock)
	case <-time.After(ttl + slack):
		t.Fatalf("Acquire(%q) still waiting %v after the lease ended", name, ttl+slack)
	}
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release(%q) after the lease ended = %v, want ErrNotHeld", name, err)
	}
}

func testRenewal(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl))
	got := testkit.AcquireAsync(t.Context(), b, name)
	select {
	case <-k.Done():
		t.Fatalf("Done of an auto-renewed lock closed (%v), want held", context.Cause(k.Context()))
	case r := <-got:
		t.Fatalf("Acquire(%q) by another owner returned (%v) while the lock was renewed", name, r.Err)
	case <-time.After(3 * ttl):
	}
	testkit.MustRelease(t, k)
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", name, r.Err)
		}
		testkit.MustRelease(t, r.Lock)
	case <-time.After(promptly):
		t.Fatalf("Acquire(%q) still waiting %v after Release", name, promptly)
	}
}

func testRefresh(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl), dlock.WithoutRenewal())
	end := time.Now().Add(2 * ttl)
	for time.Now().Before(end) {
		time.Sleep(ttl / 4)
		if err := k.Refresh(t.Context()); err != nil {
			t.Fatalf("Refresh(%q) = %v, want nil", name, err)
		}
	}
	if testkit.IsClosed(k.Done()) {
		t.Fatalf("Done of a refreshed lock closed (%v), want open", context.Cause(k.Context()))
	}
	testkit.WantNotAcquired(t, b, name, "while another owner holds it")
	testkit.MustRelease(t, k)
}

func testExpireClosesDone(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl))
	h.Expire(t, name)
	waitClosed(t, k.Done(), ttl+slack, "Done after the lock was deleted behind its holder")
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("context.Cause = %v, want ErrLost", cause)
	}
	k2 := testkit.MustTryAcquire(t, b, name)
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release(%q) of the lost lock = %v, want ErrNotHeld", name, err)
	}
	testkit.WantNotAcquired(t, a, name, "while another owner holds it")
	testkit.MustRelease(t, k2)
}

func testLateRelease(t *testing.T, h Harness) {
	a, b, c := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	// The holder's lock is deleted and taken over before the holder
	// notices: its Release must not free the new owner's lock.
	k := testkit.MustTryAcquire(t, a, name)
	h.Expire(t, name)
	k2 := testkit.MustTryAcquire(t, b, name)
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("late Release(%q) = %v, want ErrNotHeld", name, err)
	}
	testkit.WantNotAcquired(t, c, name, "while another owner holds it")
	if err := k2.Refresh(t.Context()); err != nil {
		t.Fatalf("new owner's Refresh(%q) after a late Release = %v, want nil", name, err)
	}
	if testkit.IsClosed(k2.Done()) {
		t.Fatalf("new owner's Done closed by another owner's late Release")
	}
	testkit.MustRelease(t, k2)
}
