package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redlock"
)

// startClockMasters starts n redis-servers, each on a wall clock of its
// own.
func startClockMasters(t *testing.T, n int) ([]*testserver.Redis, []*testserver.Clock) {
	t.Helper()
	rs := make([]*testserver.Redis, n)
	cks := make([]*testserver.Clock, n)
	for i := range rs {
		cks[i] = testserver.NewClock(t)
		rs[i] = testserver.StartRedisWith(t, testserver.RedisOptions{Clock: cks[i]})
	}
	return rs, cks
}

// TestOneMasterClockStep: a step of one master's wall clock, forward by
// 5 s at once or by 0.9 s twice (each below the epoch slack of 1 s), or
// back by 5 s, does not make the lock unavailable while the other two of
// three masters are healthy: each Acquire/Release cycle works and tokens
// keep increasing. Nor does a step of two masters' clocks together. The masters are younger than the restart guard
// (Options.MaxTTL), so every one of them is judged by its epoch's age.
func TestOneMasterClockStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		masters []int // whose clocks step
		steps   []time.Duration
	}{
		{"forward 5s", []int{0}, []time.Duration{5 * time.Second}},
		{"forward 0.9s twice", []int{0}, []time.Duration{900 * time.Millisecond, 900 * time.Millisecond}},
		{"back 5s", []int{0}, []time.Duration{-5 * time.Second}},
		// Two of three: exclusion is not promised then (see Clocks in
		// the package documentation), but the masters stay available.
		{"two forward 5s", []int{0, 1}, []time.Duration{5 * time.Second}},
		{"two back 5s", []int{0, 1}, []time.Duration{-5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, cks := startClockMasters(t, 3)
			cs := clients(t, addrs(rs))
			l := mustNew(t, cs, nil)
			prev := testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second)) // every master's epoch starts here
			for i, s := range tc.steps {
				for _, m := range tc.masters {
					cks[m].Step(s)
				}
				f := testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second))
				wantAbove(t, fmt.Sprintf("after step %d of masters %v's clocks", i+1, tc.masters), f, prev)
				prev = f
			}
			// A Locker that never saw the masters before the step.
			wantAbove(t, "of a new Locker", testkit.Cycle(t, mustNew(t, cs, nil), "n", dlock.WithTTL(5*time.Second)), prev)
		})
	}
}

// TestDiscountedNotContended: when too few masters count toward a quorum
// (one of three killed, one restarted empty within the restart guard) on a
// name nobody holds, TryAcquire fails with an error that says so, not with
// ErrNotAcquired ("held by another owner" in the CLI).
func TestDiscountedNotContended(t *testing.T) {
	rs := startMasters(t, 3)
	cs := clients(t, addrs(rs))
	l := mustNew(t, cs, &redlock.Options{NodeTimeout: 300 * time.Millisecond})
	testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second)) // every master's epoch starts here
	time.Sleep(1500 * time.Millisecond)                    // more than the epoch slack (1 s)
	rs[1].Restart(t)
	rs[2].Kill(t)
	k, err := l.TryAcquire(t.Context(), "free")
	if k != nil {
		k.Release(t.Context())
	}
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "count") {
		t.Fatalf("TryAcquire(%q) with 1 master killed and 1 restarted = %v, want an error saying too few masters count, not ErrNotAcquired", "free", err)
	}
}

// TestRestartedMasterClockStepsForward is TestRestartMinority on three
// masters whose restarted one's clock then steps forward by 6 s, more
// than MaxTTL: the restart guard (MaxTTL + drift + ClockBound, by that
// master's own clock) still keeps it from voting while A's lease lasts.
// The masters' epochs begin 7.5 s before the restart, more than the step
// plus the epoch slack, so the restarted master also looks younger than
// the others (a restart closer to the masters' first use is not caught:
// see the package documentation).
func TestRestartedMasterClockStepsForward(t *testing.T) {
	rs, cks := startClockMasters(t, 3)
	cs := clients(t, addrs(rs))
	const ttl = 5 * time.Second
	opts := &redlock.Options{MaxTTL: ttl, NodeTimeout: 300 * time.Millisecond}
	b := mustNew(t, cs, opts)
	prev := testkit.Cycle(t, b, "n", dlock.WithTTL(5*time.Second)) // every master's epoch starts here
	time.Sleep(7500 * time.Millisecond)

	reach := addrs(rs)
	reach[2] = "127.0.0.1:1" // A cannot reach master 2
	a := mustNew(t, clients(t, reach), opts)
	ka := testkit.MustTryAcquire(t, a, "n", dlock.WithTTL(ttl), dlock.WithoutRenewal())
	wantAbove(t, "of A", ka.Fence(), prev)
	rs[1].Restart(t)                                                                                         // forgets A's key
	if _, err := b.TryAcquire(t.Context(), "n", dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrNotAcquired) { // master 1's new epoch begins
		t.Fatalf("TryAcquire(%q) after the restart = %v, want ErrNotAcquired", "n", err)
	}
	cks[1].Step(6 * time.Second)
	k, err := b.TryAcquire(t.Context(), "n", dlock.WithTTL(ttl))
	if err == nil {
		k.Release(t.Context())
		t.Fatalf("TryAcquire(%q) while A holds it (lost by a restarted master whose clock then stepped +6 s) = a lock with token %d (A's %d), want ErrNotAcquired", "n", k.Fence(), ka.Fence())
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) while A holds it = %v, want ErrNotAcquired (master 0 holds A's key)", "n", err)
	}
	if err := context.Cause(ka.Context()); err != nil {
		t.Fatalf("A's lease ended before the check (a slow restart?): %v; the check proves nothing", err)
	}
	ka.Release(t.Context())
}
