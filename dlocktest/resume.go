package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// foreignToken returns the token of a hold on a private memlock Store:
// another backend than h's, or (on memlock) another namespace.
func foreignToken(t *testing.T, name string) string {
	t.Helper()
	l, err := memlock.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	k := testkit.MustTryAcquire(t, l, name)
	return k.Token()
}

func testResume(t *testing.T, h Harness) {
	a, b, c := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(10*time.Second))
	tok := k.Token()
	r, err := b.Resume(t.Context(), tok)
	if h.NoResume {
		wantUnsupported(t, "Resume", err)
		if err := k.Refresh(t.Context()); err != nil {
			t.Errorf("the holder's Refresh after a refused Resume = %v, want nil", err)
		}
		testkit.MustRelease(t, k)
		return
	}
	if err != nil {
		t.Fatalf("Resume(Token of a live hold) = %v, want a lock", err)
	}
	if r.Name() != name || r.Fence() != k.Fence() || r.Owner() == k.Owner() {
		t.Errorf("resumed lock: name %q fence %d owner %q; want %q, %d and a new owner (was %q)", r.Name(), r.Fence(), r.Owner(), name, k.Fence(), k.Owner())
	}
	testkit.WantNotAcquired(t, c, name, "after Resume")
	if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the first holder's Refresh after Resume = %v, want ErrNotHeld", err)
	}
	if !testkit.IsClosed(k.Done()) {
		t.Errorf("the first holder's Done is open after its Refresh found the hold resumed")
	}
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the first holder's Release after Resume = %v, want ErrNotHeld", err)
	}
	testkit.WantNotAcquired(t, c, name, "after the first holder's late Release")
	if _, err := c.Resume(t.Context(), tok); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Resume of a token resumed already = %v, want ErrNotHeld", err)
	}
	testkit.MustRelease(t, r)
	if _, err := c.Resume(t.Context(), r.Token()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Resume of a released hold = %v, want ErrNotHeld", err)
	}
	k2 := testkit.MustTryAcquire(t, c, name)
	testkit.MustRelease(t, k2)
}

func testResumeRefused(t *testing.T, h Harness) {
	a, b, c := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	for _, tok := range []string{"", "dlock1.", "dlock1.!!!", "dlock1.e30", "redis:" + name, foreignToken(t, name)} {
		if _, err := b.Resume(t.Context(), tok); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Resume(%q) = %v, want ErrInvalid", tok, err)
		}
	}
	if h.NoResume {
		return
	}
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(h.ttl()))
	tok := k.Token()
	h.Expire(t, name)
	k2 := testkit.MustTryAcquire(t, c, name)
	if _, err := b.Resume(t.Context(), tok); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Resume of a hold taken over = %v, want ErrNotHeld", err)
	}
	if err := k2.Refresh(t.Context()); err != nil {
		t.Errorf("the new holder's Refresh after a refused Resume = %v, want nil", err)
	}
	testkit.MustRelease(t, k2)
	if h.NoModes {
		return
	}
	s := testkit.MustTryAcquire(t, a, name, dlock.Shared())
	rs, err := b.Resume(t.Context(), s.Token())
	if err != nil {
		t.Fatalf("Resume of a shared hold = %v", err)
	}
	if _, err := b.Resume(t.Context(), s.Token(), dlock.WithLimit(2)); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Resume of a shared hold's token WithLimit(2) = %v, want ErrInvalid", err)
	}
	other := testkit.MustTryAcquire(t, c, name, dlock.Shared()) // still a shared name
	testkit.WantNotAcquired(t, c, name, "while resumed and other shared holds hold it")
	testkit.MustRelease(t, rs)
	testkit.MustRelease(t, other)
}

func testExtend(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(time.Minute), dlock.WithoutRenewal())
	sent := time.Now()
	err := k.Extend(t.Context(), ttl)
	if h.NoExtend {
		wantUnsupported(t, "Extend", err)
		testkit.MustRelease(t, k)
		return
	}
	if err != nil {
		t.Fatalf("Extend(%v) of a 1m lease = %v", ttl, err)
	}
	if d := k.Deadline(); d.After(sent.Add(ttl)) {
		t.Errorf("Deadline is %v after Extend(%v) was sent, want at most the TTL", d.Sub(sent), ttl)
	}
	// Shorter: the lease now ends after ttl, long before the minute.
	ctx, cancel := context.WithTimeout(t.Context(), ttl+slack)
	defer cancel()
	k2, err := b.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire after the holder's Extend(%v) of a 1m lease = %v, want the name within %v", ttl, err, ttl+slack)
	}
	waitClosed(t, k.Done(), slack, "Done of a lock whose shortened lease ran out")
	// Longer: a lease of ttl extended to 10×ttl outlives 2×ttl unrenewed.
	if err := k2.Extend(t.Context(), 10*ttl); err != nil {
		t.Fatalf("Extend(%v) = %v", 10*ttl, err)
	}
	time.Sleep(2 * ttl)
	testkit.WantNotAcquired(t, a, name, "2×TTL after Extend(10×TTL)")
	if testkit.IsClosed(k2.Done()) {
		t.Errorf("Done closed 2×TTL after Extend(10×TTL): %v", context.Cause(k2.Context()))
	}
	testkit.MustRelease(t, k2)
	if err := k2.Extend(t.Context(), ttl); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Extend of a released handle = %v, want ErrNotHeld", err)
	}
}

// testWarnings checks what every store shows of Lock.Warnings: nothing
// while renewals succeed, and a channel that closes with Done. (The
// warning before a loss needs a stalled store: each backend's fault
// tests pause their server for it.)
func testWarnings(t *testing.T, h Harness) {
	a := newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl))
	ws := k.Warnings()
	time.Sleep(2 * ttl)
	select {
	case w := <-ws:
		if w.Err != nil {
			t.Errorf("a warning while the store answers: %v", w.Err)
		}
	default:
	}
	testkit.MustRelease(t, k)
	select {
	case _, ok := <-ws:
		if ok {
			t.Errorf("Warnings sent a value at Release instead of closing")
		}
	case <-time.After(slack):
		t.Errorf("Warnings still open %v after Release", slack)
	}
}

// testLockDelay: a hold whose lease runs out unrenewed keeps the name for
// its lock-delay after the lease (a crashed holder, for storage that
// checks no tokens); a released one frees it at once.
func testLockDelay(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	delay := 2 * ttl
	taken := time.Now()
	k, err := a.TryAcquire(t.Context(), name, dlock.WithTTL(ttl), dlock.WithLockDelay(delay), dlock.WithoutRenewal())
	if h.NoLockDelay {
		wantUnsupported(t, "TryAcquire WithLockDelay", err)
		testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name))
		return
	}
	if err != nil {
		t.Fatalf("TryAcquire WithLockDelay(%v) = %v", delay, err)
	}
	waitClosed(t, k.Done(), ttl+slack, "Done of an unrenewed lock")
	time.Sleep(time.Until(taken.Add(ttl + delay/2)))
	testkit.WantNotAcquired(t, b, name, "in the lock-delay after the lease ran out")
	if !h.NoAdmin {
		infos, err := b.Inspect(t.Context(), name)
		if err != nil || len(infos) != 1 || !infos[0].Delayed {
			t.Errorf("Inspect in the lock-delay = %+v, %v; want one holder, Delayed", infos, err)
		}
	}
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release of the lost lock = %v, want ErrNotHeld", err)
	}
	testkit.WantNotAcquired(t, b, name, "after the lost holder's Release, in its lock-delay")
	// A waiter on a store whose leases run on its wall clock takes a name
	// in doubt once it has seen the holder's state unchanged for the
	// holder's TTL+delay from its first look (driver.Result.Stamp): up to
	// TTL+delay from now, not only the delay's rest.
	ctx, cancel := context.WithTimeout(t.Context(), 2*(ttl+delay)+slack)
	defer cancel()
	k2, err := b.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire after the lock-delay = %v", err)
	}
	if got := time.Since(taken); got < ttl+delay {
		t.Errorf("the name was taken again %v after the first acquisition, before its TTL+delay %v", got, ttl+delay)
	}
	testkit.MustRelease(t, k2)
	k3 := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl), dlock.WithLockDelay(time.Minute))
	testkit.MustRelease(t, k3)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name)) // a release frees at once
}
