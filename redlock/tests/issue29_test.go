package redlock_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redlock"
)

// issue29Slack is the allowance for scheduling on a loaded machine.
const issue29Slack = 2 * time.Second

// threeMasters starts three masters and returns their redlock URL and
// clients.
func threeMasters(t *testing.T) (string, []redis.UniversalClient) {
	t.Helper()
	as := addrs(startMasters(t, 3))
	return "redlock://" + strings.Join(as, ","), clients(t, as)
}

// TestResumeAcrossProcesses: the adversary is the first holder, a
// process that still runs and refreshes on every master while another
// process resumes its hold (a Locker that never acquired it, so with no
// state of its own for it) and releases it, and a third takes the name:
// the first holder's next refresh must report the loss, and its late
// Release must not free the third owner's hold.
func TestResumeAcrossProcesses(t *testing.T) {
	url, cs := threeMasters(t)
	const ttl = 3 * time.Second
	name := "resume-across-processes"
	w, tok := testworker.StartTokenHold(t, url, name, ttl, 0)
	b, c := mustNew(t, cs, nil), mustNew(t, cs, nil)
	lost := testworker.ResumeFromTokenHold(t, w, tok, b, c, name, ttl)
	t.Logf("the worker reported the loss %v after the Resume (TTL %v)", lost, ttl)
}

// TestResumeGivesBackMinority: the adversary is a hold that lives on a
// minority of the masters only (the others lost it): Resume must refuse
// it with ErrNotHeld and leave no key of the new owner behind.
func TestResumeGivesBackMinority(t *testing.T) {
	_, cs := threeMasters(t)
	a, b := mustNew(t, cs, nil), mustNew(t, cs, nil)
	name := "resume-minority"
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(time.Minute), dlock.WithoutRenewal())
	for _, c := range cs[:2] {
		c.Del(t.Context(), redlock.Key("", name))
	}
	if _, err := b.Resume(t.Context(), k.Token()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Resume of a hold left on 1 of 3 masters = %v, want ErrNotHeld", err)
	}
	if n := keysLeft(t, cs, name); n != 0 {
		t.Errorf("%d masters keep a key after the refused Resume, want 0 (the one moved is given back)", n)
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name))
}

// TestLockDelayAfterKill: the adversary is a holder process killed with
// SIGKILL while it holds a name WithLockDelay: nobody may take the name
// until a majority of its keys lived TTL+delay from its last refresh (the
// lower bound is the safety fact). A clean release frees it at once.
func TestLockDelayAfterKill(t *testing.T) {
	url, cs := threeMasters(t)
	const ttl, delay = time.Second, 2 * time.Second
	name := "delay-kill"
	w, _ := testworker.StartTokenHold(t, url, name, ttl, delay)
	w.Kill(t)
	// Each key lives TTL+delay from the last refresh that reached its
	// master: its PTTL, read after before, dates that refresh no earlier
	// than this estimate. The name is free once a majority expired.
	before := time.Now()
	var landed []time.Time
	for _, c := range cs {
		if p := c.PTTL(t.Context(), redlock.Key("", name)).Val(); p > 0 {
			landed = append(landed, before.Add(p-(ttl+delay)))
		}
	}
	slices.SortFunc(landed, func(x, y time.Time) int { return x.Compare(y) })
	if len(landed) < 2 {
		t.Fatalf("the killed holder's keys live on %d masters, want a majority", len(landed))
	}
	l := mustNew(t, cs, nil)
	got := testkit.AcquireAsync(t.Context(), l, name)
	time.Sleep(time.Until(landed[1].Add(ttl + delay/2)))
	infos, err := l.Inspect(t.Context(), name)
	if err != nil || len(infos) != 1 || !infos[0].Delayed {
		t.Errorf("Inspect in the lock-delay = %+v, %v; want one holder, Delayed", infos, err)
	}
	next := testkit.WantAcquired(t, got, name, ttl+delay+issue29Slack)
	took := next.At.Sub(landed[1])
	t.Logf("next acquisition %v after the killed holder's last refresh landed on a majority (TTL+delay %v)", took, ttl+delay)
	if took < ttl+delay {
		t.Errorf("the name was taken %v after the last refresh, before TTL+delay %v", took, ttl+delay)
	}
	testkit.MustRelease(t, next.Lock)

	clean, _ := testworker.StartTokenHold(t, url, name, ttl, time.Minute)
	testworker.StopTokenHold(t, clean, issue29Slack)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, l, name)) // at once: no lock-delay after a release
}

// TestWarningBeforeLossPausedMajority: the adversary is a majority of the
// masters stopped with SIGSTOP under a held lock: Warnings must report
// the failing refresh (Err set) before Done closes.
func TestWarningBeforeLossPausedMajority(t *testing.T) {
	rs := startMasters(t, 3)
	l := mustNew(t, clients(t, addrs(rs)), nil)
	const ttl = 2 * time.Second
	k := testkit.MustTryAcquire(t, l, "warn-paused", dlock.WithTTL(ttl))
	ws := k.Warnings() // watched from before the pause
	for _, r := range rs[:2] {
		r.Pause(t)
		defer r.Resume(t)
	}
	warned, done := testkit.WarnedBeforeDone(t, k, ws, ttl+issue29Slack)
	t.Logf("warning %v before Done (TTL %v)", done.Sub(warned), ttl)
}

// TestResumeExtendRoundTrips: the adversary is a regression that turns
// Extend or Resume into several steps: each is one round trip to each
// master, the masters in parallel (once they have the scripts).
func TestResumeExtendRoundTrips(t *testing.T) {
	as := addrs(startMasters(t, 3))
	cs, counted := clients(t, as), clients(t, as)
	cnt := &testserver.RoundTrips{}
	for _, c := range counted {
		c.AddHook(cnt)
	}
	a, b := mustNew(t, cs, nil), mustNew(t, counted, nil)
	resume, extend := testkit.ResumeExtendCost(t, a, b, "round-trips", cnt.Count)
	t.Logf("round trips over 3 masters: Resume %d, Extend %d", resume, extend)
	if resume != 3 || extend != 3 {
		t.Errorf("round trips over 3 masters: Resume %d, Extend %d; want 3 each (one per master)", resume, extend)
	}
}
