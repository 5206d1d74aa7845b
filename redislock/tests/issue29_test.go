package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redislock"
)

// TestResumeAcrossProcesses: the adversary is the first holder, a
// process that still runs and renews while another process resumes its
// hold and releases it, and a third takes the name: the first holder's
// next renewal must report the loss, and its late Release must not free
// the third owner's hold.
func TestResumeAcrossProcesses(t *testing.T) {
	r := testserver.StartRedis(t)
	const ttl = 3 * time.Second
	name := "resume-across-processes"
	w, tok := testworker.StartTokenHold(t, "redis://"+r.Addr(), name, ttl, 0)
	b, c := newLocker(t, r.Client(t)), newLocker(t, r.Client(t))
	lost := testworker.ResumeFromTokenHold(t, w, tok, b, c, name, ttl)
	t.Logf("the worker reported the loss %v after the Resume (TTL %v)", lost, ttl)
}

// TestResumeKeepsQueue: the adversary is a waiter queued behind a hold
// whose owner changes under it: the new owner's Release must hand it the
// name, and the first owner must find the hold gone.
func TestResumeKeepsQueue(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b, c := newLocker(t, client), newLocker(t, client), newLocker(t, client)
	name := "resume-queue"
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(10*time.Second))
	got := testkit.AcquireAsync(t.Context(), b, name)
	testkit.Eventually(t, "the waiter queued", func() bool {
		return client.LLen(t.Context(), redislock.Key("", name)+":q").Val() == 1
	})
	rk, err := c.Resume(t.Context(), k.Token())
	if err != nil {
		t.Fatalf("Resume = %v, want a lock", err)
	}
	testkit.WantWaiting(t, got, name)
	testkit.MustRelease(t, rk)
	next := testkit.WantAcquired(t, got, name, slack)
	if next.Lock.Fence() <= rk.Fence() {
		t.Errorf("the waiter's token %d, want above the resumed hold's %d", next.Lock.Fence(), rk.Fence())
	}
	if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the first owner's Refresh = %v, want ErrNotHeld", err)
	}
	testkit.MustRelease(t, next.Lock)
}

// TestResumeKeepsMode: the adversary is a token whose mode the store
// must keep: a resumed permit stays a permit of the same limit, counted
// against it, and a resumed shared hold stays shared.
func TestResumeKeepsMode(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b := newLocker(t, client), newLocker(t, client)
	name := "resume-mode"
	p1 := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
	p2 := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
	rp, err := b.Resume(t.Context(), p1.Token())
	if err != nil {
		t.Fatalf("Resume of a permit = %v", err)
	}
	testkit.WantNotAcquired(t, b, name, "with both permits held, one resumed", dlock.WithLimit(2))
	testkit.MustRelease(t, rp)
	p3 := testkit.MustTryAcquire(t, b, name, dlock.WithLimit(2))
	for _, k := range []*dlock.Lock{p2, p3} {
		testkit.MustRelease(t, k)
	}
	s := testkit.MustTryAcquire(t, a, name, dlock.Shared())
	rs, err := b.Resume(t.Context(), s.Token())
	if err != nil {
		t.Fatalf("Resume of a shared hold = %v", err)
	}
	infos, err := b.Inspect(t.Context(), name)
	if err != nil || len(infos) != 1 || !infos[0].Shared || infos[0].Owner != rs.Owner() {
		t.Errorf("Inspect after resuming a shared hold = %+v, %v; want one shared holder %q", infos, err, rs.Owner())
	}
	testkit.MustRelease(t, rs)
}

// TestLockDelayAfterKill: the adversary is a holder process killed with
// SIGKILL while it holds a name WithLockDelay: nobody may take the name
// until TTL+delay after the holder's last renewal landed (the lower
// bound is the safety fact). A holder that releases cleanly frees the
// name at once.
func TestLockDelayAfterKill(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl, delay = time.Second, 2 * time.Second
	name := "delay-kill"
	w, _ := testworker.StartTokenHold(t, "redis://"+r.Addr(), name, ttl, delay)
	w.Kill(t)
	// The key lives TTL+delay plus the clock bound from the last renewal:
	// its PTTL dates that renewal (no later than this estimate).
	pttl := client.PTTL(t.Context(), redislock.Key("", name)).Val()
	landed := time.Now().Add(pttl - (ttl + delay + driver.DefaultClockBound))
	l := newLocker(t, client)
	got := testkit.AcquireAsync(t.Context(), l, name)
	time.Sleep(time.Until(landed.Add(ttl + delay/2)))
	infos, err := l.Inspect(t.Context(), name)
	if err != nil || len(infos) != 1 || !infos[0].Delayed {
		t.Errorf("Inspect in the lock-delay = %+v, %v; want one holder, Delayed", infos, err)
	}
	next := testkit.WantAcquired(t, got, name, ttl+delay+slack)
	took := next.At.Sub(landed)
	t.Logf("next acquisition %v after the killed holder's last renewal landed (TTL+delay %v)", took, ttl+delay)
	if took < ttl+delay {
		t.Errorf("the name was taken %v after the last renewal, before TTL+delay %v", took, ttl+delay)
	}
	testkit.MustRelease(t, next.Lock)

	clean, _ := testworker.StartTokenHold(t, "redis://"+r.Addr(), name, ttl, time.Minute)
	testworker.StopTokenHold(t, clean, slack)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, l, name)) // at once: no lock-delay after a release
}

// TestLockDelayValue: the adversary is an older redislock on the same
// keys during an upgrade. A hold without a delay is stored as any
// other; one with a delay records TTL+delay as its lease (so every
// script keeps it that long and observes its stamp for that long) and
// carries the delay only in front of its metadata. (What versions
// before the packed value make of it: TestValueUpgradeNewHolder.)
func TestLockDelayValue(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	l := newLocker(t, client)
	for _, tc := range []struct {
		delay time.Duration
		ttl   uint64 // the lease recorded, ms
		want  string // the value after the stamp
	}{
		{0, 1000, "|meta"},
		{2 * time.Second, 3000, "|\xff2000\xffmeta"},
	} {
		name := "value-" + tc.delay.String()
		k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(time.Second), dlock.WithLockDelay(tc.delay), dlock.WithMetadata("meta"), dlock.WithoutRenewal())
		v := client.Get(t.Context(), redislock.Key("", name)).Val()
		if want := packed(k.Owner(), k.Fence(), tc.ttl, 0) + tc.want; v != want {
			t.Errorf("value with delay %v = %q, want %q", tc.delay, v, want)
		}
		infos, err := l.Inspect(t.Context(), name)
		if err != nil || len(infos) != 1 || infos[0].Metadata != "meta" || infos[0].Delayed {
			t.Errorf("Inspect of a live hold with delay %v = %+v, %v; want metadata %q, not Delayed", tc.delay, infos, err, "meta")
		}
		testkit.MustRelease(t, k)
	}
}

// TestWarningBeforeLossPausedServer: the adversary is a server stopped
// with SIGSTOP under a held lock: Warnings must report the stalled
// renewal (Err set) before Done closes.
func TestWarningBeforeLossPausedServer(t *testing.T) {
	r := testserver.StartRedis(t)
	const ttl = 2 * time.Second
	l := newLocker(t, r.Client(t))
	k := testkit.MustTryAcquire(t, l, "warn-paused", dlock.WithTTL(ttl))
	ws := k.Warnings() // watched from before the pause
	r.Pause(t)
	defer r.Resume(t)
	warned, done := testkit.WarnedBeforeDone(t, k, ws, ttl+slack)
	t.Logf("warning %v before Done (TTL %v)", done.Sub(warned), ttl)
}

// TestResumeExtendRoundTrips: the adversary is a regression that turns
// Extend or Resume into several steps: each is one round trip (once the
// server has the script).
func TestResumeExtendRoundTrips(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	cnt := &testserver.RoundTrips{}
	client.AddHook(cnt)
	a, b := newLocker(t, r.Client(t)), newLocker(t, client)
	resume, extend := testkit.ResumeExtendCost(t, a, b, "round-trips", cnt.Count)
	t.Logf("round trips: Resume %d, Extend %d", resume, extend)
	if resume != 1 || extend != 1 {
		t.Errorf("round trips: Resume %d, Extend %d; want 1 each", resume, extend)
	}
}
