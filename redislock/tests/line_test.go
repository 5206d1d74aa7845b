package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// waitersOf waits until l.Waiters(name) reports want.
func waitersOf(t *testing.T, l *dlock.Locker, name string, want int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("Waiters(%q) = %d", name, want), func() bool {
		n, err := l.Waiters(t.Context(), name)
		if err != nil {
			t.Fatalf("Waiters(%q) = %v", name, err)
		}
		return n == want
	})
}

// TestLineHandsOverInPlace: a Locker's waiters of one name keep one entry
// in the server's queue, and its holder hands the name to the next waiter
// of its cohort in the release script itself. The adversary is the queue
// of PR 28's hot name: a handoff through it costs the waiter's join, the
// release's LPOP and a message, and the waiters come in order. Here the
// second acquisition must come with no LPOP and no PUBLISH on the server,
// and every waiter in arrival order with a larger fence.
func TestLineHandsOverInPlace(t *testing.T) {
	r := testserver.StartRedis(t)
	c := r.Client(t)
	l, other := newLocker(t, c), newLocker(t, c)
	const name = "line-in-place"
	k := testkit.MustTryAcquire(t, l, name)
	var got []<-chan testkit.Acquired
	for i := range 3 {
		got = append(got, testkit.AcquireAsync(t.Context(), l, name))
		waitersOf(t, l, name, i+1)
	}
	// One entry on the server (the line's active waiter), three waiters
	// in the Locker.
	if n := queueLen(t, c, name); n != 1 {
		t.Fatalf("queue length with 3 waiters in one Locker = %d, want 1 (the line's entry)", n)
	}
	waitersOf(t, other, name, 1)

	// The holder took the name before anyone waited: no cohort yet, so
	// its release goes through the queue to the first waiter.
	testkit.MustRelease(t, k)
	first := testkit.WantAcquired(t, got[0], name, slack)
	// The name came to the line: the second waiter is its cohort; the
	// third, the newest, waits in the server's queue for the next turn.
	testkit.Eventually(t, "the newest waiter joined the queue", func() bool { return queueLen(t, c, name) == 1 })
	before := serverCommands(t, c)
	testkit.MustRelease(t, first.Lock)
	second := testkit.WantAcquired(t, got[1], name, slack)
	after := serverCommands(t, c)
	if d := after["lpop"] - before["lpop"]; d != 0 {
		t.Errorf("the handoff within the Locker ran LPOP %d times, want 0 (the queue untouched)", d)
	}
	if d := after["publish"] - before["publish"]; d != 0 {
		t.Errorf("the handoff within the Locker published %d messages, want 0", d)
	}
	if second.Lock.Fence() <= first.Lock.Fence() {
		t.Errorf("fences %d then %d, want increasing", first.Lock.Fence(), second.Lock.Fence())
	}
	v, err := c.Get(t.Context(), redislock.Key("", name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner, fence, _, ok := testhook.ParseValue(v)
	if !ok || fence != second.Lock.Fence() || owner == "" {
		t.Errorf("value after the handoff = %q (owner %q, fence %d), want the second waiter's fence %d", v, owner, fence, second.Lock.Fence())
	}
	testkit.WantWaiting(t, got[2], name)
	testkit.MustRelease(t, second.Lock)
	third := testkit.WantAcquired(t, got[2], name, slack)
	if third.Lock.Fence() <= second.Lock.Fence() {
		t.Errorf("fences %d then %d, want increasing", second.Lock.Fence(), third.Lock.Fence())
	}
	testkit.MustRelease(t, third.Lock)
	if n := queueLen(t, c, name); n != 0 {
		t.Errorf("queue length at the end = %d, want 0", n)
	}
}

// TestLinesTakeTurns: two Lockers with three waiters each. The name goes
// to the Lockers in the queue's order, each serving the waiters of its
// cohort in arrival order before it goes on: a1 a2 b1 b2 a3 b3. The
// adversary is a Locker whose holders hand the name to their own waiters
// for ever: the other Locker's waiters must get their turn. Before each
// release, the test waits until every Locker that still has waiters has
// its entry on the server, so the order does not depend on how fast a
// newly active waiter joins the queue.
func TestLinesTakeTurns(t *testing.T) {
	r := testserver.StartRedis(t)
	c := r.Client(t)
	a, b, watcher := newLocker(t, c), newLocker(t, c), newLocker(t, c)
	const name = "lines-turns"
	k := testkit.MustTryAcquire(t, watcher, name)
	type acquired struct {
		id   string
		lock *dlock.Lock
		err  error
	}
	got := make(chan acquired, 6)
	join := func(l *dlock.Locker, id string, server, local int) {
		go func() {
			k, err := l.Acquire(t.Context(), name)
			got <- acquired{id, k, err}
		}()
		waitersOf(t, watcher, name, server) // the server's entries
		waitersOf(t, l, name, local)        // and this Locker's line
	}
	join(a, "a1", 1, 1)
	join(a, "a2", 1, 2)
	join(a, "a3", 1, 3)
	join(b, "b1", 2, 2)
	join(b, "b2", 2, 3)
	join(b, "b3", 2, 4)
	testkit.MustRelease(t, k)
	var order []string
	var last uint64
	// The queue's length while each holder holds, in the expected order:
	// the entries of the Lockers that still have waiters.
	queued := []int64{2, 2, 2, 2, 1, 0}
	for i := range queued {
		var x acquired
		select {
		case x = <-got:
		case <-time.After(10 * slack):
			t.Fatalf("after %v: nobody acquired", order)
		}
		if x.err != nil {
			t.Fatalf("%s: Acquire = %v", x.id, x.err)
		}
		if x.lock.Fence() <= last {
			t.Errorf("%s: fence %d after %d, want larger", x.id, x.lock.Fence(), last)
		}
		last = x.lock.Fence()
		order = append(order, x.id)
		testkit.Eventually(t, fmt.Sprintf("queue length %d while %s holds", queued[i], x.id), func() bool {
			return queueLen(t, c, name) == queued[i]
		})
		testkit.MustRelease(t, x.lock)
	}
	if want := []string{"a1", "a2", "b1", "b2", "a3", "b3"}; !slices.Equal(order, want) {
		t.Errorf("acquisition order %v, want %v (each Locker's cohort in turn)", order, want)
	}
}

// TestLinePassiveCancelLeavesNothing: a waiter that waits in its Locker's
// line has nothing on the server; cancelled, it returns at once, the
// count drops, and the name goes to the next waiter as before.
func TestLinePassiveCancelLeavesNothing(t *testing.T) {
	r := testserver.StartRedis(t)
	c := r.Client(t)
	l := newLocker(t, c)
	const name = "line-cancel"
	k := testkit.MustTryAcquire(t, l, name)
	active := testkit.AcquireAsync(t.Context(), l, name)
	waitersOf(t, l, name, 1)
	ctx, cancel := context.WithCancel(t.Context())
	passive := testkit.AcquireAsync(ctx, l, name)
	waitersOf(t, l, name, 2)
	cancel()
	select {
	case got := <-passive:
		if !errors.Is(got.Err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled", got.Err)
		}
	case <-time.After(slack):
		t.Fatal("cancelled Acquire still waiting")
	}
	waitersOf(t, l, name, 1)
	if n := queueLen(t, c, name); n != 1 {
		t.Errorf("queue length = %d, want 1 (the active waiter's entry)", n)
	}
	testkit.MustRelease(t, k)
	testkit.MustRelease(t, testkit.WantAcquired(t, active, name, slack).Lock)
}

// TestLineHandoffReplyLost: the release that hands the name to a waiter
// of its own Locker gets no reply (the proxy drops what the server
// sends), though the server ran it. The waiter then asks the server
// whether it holds the name. The adversary is the lost reply: the name
// must be neither held by nobody who knows it (a leak for the lease's
// two minutes) nor held twice. Whichever way the waiter's question goes
// (answered after the heal, or lost too), the Locker's waiters that get
// the name hold it in turn with larger fences, and then it is free.
func TestLineHandoffReplyLost(t *testing.T) {
	r := testserver.StartRedis(t)
	c := r.Client(t)
	p := testserver.StartProxy(t, r.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer viaProxy.Close()
	l, watcher := newLocker(t, viaProxy), newLocker(t, c)
	const name = "line-reply-lost"
	ttl := dlock.WithTTL(2 * time.Minute) // longer than the checks below: a leaked hold would show
	k := testkit.MustTryAcquire(t, l, name, ttl)
	var got []<-chan testkit.Acquired
	for i := range 3 {
		got = append(got, testkit.AcquireAsync(t.Context(), l, name, ttl))
		waitersOf(t, l, name, i+1)
	}
	testkit.MustRelease(t, k)
	first := testkit.WantAcquired(t, got[0], name, slack)
	testkit.Eventually(t, "the newest waiter joined the queue", func() bool { return queueLen(t, c, name) == 1 })

	p.DropReplies(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err := first.Lock.Release(ctx)
	cancel()
	if err == nil {
		t.Fatalf("Release with its reply dropped = nil, want an error")
	}
	v, gerr := c.Get(t.Context(), redislock.Key("", name)).Result()
	if gerr != nil {
		t.Fatal(gerr)
	}
	owner, fence, _, ok := testhook.ParseValue(v)
	if !ok || owner == "" || fence <= first.Lock.Fence() {
		t.Fatalf("value after the release ran = %q, want the name handed on with a fence above %d", v, first.Lock.Fence())
	}
	p.Heal(t)

	last := first.Lock.Fence()
	for i, ch := range got[1:] {
		select {
		case a := <-ch:
			if a.Err != nil {
				// Its question (or, for the newest, a heartbeat) lost
				// its reply too: the core freed what it may have held.
				t.Logf("waiter %d: Acquire = %v", i+2, a.Err)
				continue
			}
			if a.Lock.Fence() <= last {
				t.Errorf("waiter %d: fence %d, want above %d", i+2, a.Lock.Fence(), last)
			}
			if i == 0 && a.Lock.Fence() != fence {
				t.Errorf("waiter 2: fence %d, want %d, the one the lost release handed it", a.Lock.Fence(), fence)
			}
			last = a.Lock.Fence()
			testkit.MustRelease(t, a.Lock)
		case <-time.After(10 * slack):
			t.Fatalf("waiter %d: still waiting", i+2)
		}
	}
	testkit.Eventually(t, "the name free again", func() bool {
		k, err := watcher.TryAcquire(t.Context(), name)
		if err != nil {
			return false
		}
		testkit.MustRelease(t, k)
		return true
	})
}
