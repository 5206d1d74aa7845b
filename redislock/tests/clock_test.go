package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// storeHolder reads name's key: its exclusive holder ("" for a tombstone
// or no key) and the fencing token it records (0 for no key).
func storeHolder(t *testing.T, client *redis.Client, name string) (owner string, fence uint64) {
	t.Helper()
	v, err := client.Get(t.Context(), redislock.Key("", name)).Result()
	if err == redis.Nil {
		return "", 0
	}
	if err != nil {
		t.Fatalf("GET %s = %v", redislock.Key("", name), err)
	}
	owner, fence, _, ok := testhook.ParseValue(v)
	if !ok {
		t.Fatalf("GET %s = %q, want a holder's value or a tombstone", redislock.Key("", name), v)
	}
	return owner, fence
}

// queueEntry returns the owner and ticket of the first entry of name's
// queue ("", 0 when it is empty).
func queueEntry(t *testing.T, client *redis.Client, name string) (owner string, ticket int) {
	t.Helper()
	e, err := client.LIndex(t.Context(), redislock.Key("", name)+":q", 0).Result()
	if err == redis.Nil {
		return "", 0
	}
	if err != nil {
		t.Fatalf("LINDEX = %v", err)
	}
	parts := strings.Split(e, "|")
	if len(parts) < 2 {
		t.Fatalf("queue entry %q, want owner|ticket|...", e)
	}
	ticket, _ = strconv.Atoi(parts[1])
	return parts[0], ticket
}

// TestLateGrantMessageIsOnlyAHint is finding 1 of issue 23: a grant
// message that arrives long after the call whose ticket it names was sent
// may be for a grant that lapsed unused: the name passed on since, and
// may have been handed to the same waiter again with a newer token. The
// waiter must then ask the server, and return the token the store holds.
//
// The test makes that state at once and deterministically: once the
// waiter's queue entry shows ticket 5 or more (so ticket 1's call was
// sent at least three heartbeats, 2 s, ago: more than TTL/2), one MULTI
// hands the name to the waiter as a release's grant would (its value,
// in the format the package documentation gives, with a token above
// every earlier one, and its queue entry gone) without a message, and
// PUBLISHes the stale grant "owner|older token|1" to its channel. That
// message is the only one the waiter hears; the core's confirmation of a
// lease that began more than TTL/2 ago then checks the owner, which is
// right, so only the token can be wrong.
func TestLateGrantMessageIsOnlyAHint(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b := newLocker(t, client), newLocker(t, client)
	const name, ttl = "late-grant", 2 * time.Second
	early := testkit.MustTryAcquire(t, a, name)
	stale := early.Fence()
	testkit.MustRelease(t, early)
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(time.Minute))
	defer k.Release(t.Context()) // taken from it below: ErrNotHeld
	got := testkit.AcquireAsync(t.Context(), b, name, dlock.WithTTL(ttl))
	var owner string
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, ticket := queueEntry(t, client, name)
		if ticket >= 5 {
			owner = o
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter's queue entry has ticket %d after 30s, want 5", ticket)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fresh := k.Fence() + 1
	key := redislock.Key("", name)
	lockerID, _, _ := strings.Cut(owner, ":")
	var pub *redis.IntCmd
	_, err := client.TxPipelined(t.Context(), func(p redis.Pipeliner) error {
		p.Set(t.Context(), key, owner+"|"+strconv.FormatUint(fresh, 10)+"."+strconv.FormatInt(ttl.Milliseconds(), 10)+".0", ttl+driver.DefaultClockBound)
		p.Del(t.Context(), key+":q")
		pub = p.Publish(t.Context(), redislock.DefaultPrefix+"w:"+lockerID, owner+"|"+strconv.FormatUint(stale, 10)+"|1")
		return nil
	})
	if err != nil || pub.Val() != 1 {
		t.Fatalf("MULTI hand-over and stale grant message = %v (%d receivers), want 1 receiver", err, pub.Val())
	}
	res := testkit.WantAcquired(t, got, name, 30*time.Second)
	defer testkit.MustRelease(t, res.Lock)
	holder, fence := storeHolder(t, client, name)
	if holder != res.Lock.Owner() || fence != res.Lock.Fence() {
		t.Fatalf("Acquire(%q) after a late grant message: Fence() = %d (owner %s), want the store's %d (owner %q)", name, res.Lock.Fence(), res.Lock.Owner(), fence, holder)
	}
	if res.Lock.Fence() <= k.Fence() || res.Lock.Fence() <= stale {
		t.Fatalf("Acquire(%q) Fence() = %d, want above the earlier tokens %d and %d", name, res.Lock.Fence(), stale, k.Fence())
	}
}

// waitServerTime polls the server's clock until it reads at least until.
func waitServerTime(t *testing.T, client *redis.Client, until time.Time) {
	t.Helper()
	for {
		now, err := client.Time(t.Context()).Result()
		if err != nil {
			t.Fatalf("TIME = %v", err)
		}
		if !now.Before(until) {
			return
		}
		time.Sleep(min(until.Sub(now), 200*time.Millisecond))
	}
}

// TestTokensAboveTombstoneAfterStepBackAndRestart is finding 2 of issue
// 23: on a server that persists its writes (AOF, fsync always), a clock
// step back of up to the clock bound, across a restart, after the old
// 5 s tombstone would have expired, must not make the next token go down.
func TestTokensAboveTombstoneAfterStepBackAndRestart(t *testing.T) {
	c := testserver.NewClock(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c, Persistent: true})
	client := r.Client(t)
	l := newLocker(t, client)
	const name = "step-back"
	k := testkit.MustTryAcquire(t, l, name)
	last := k.Fence()
	testkit.MustRelease(t, k)
	released, err := client.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME = %v", err)
	}
	// Past the old tombstone's life (5 s) by the server's clock.
	waitServerTime(t, client, released.Add(6*time.Second))
	c.Step(-8 * time.Second)
	r.Restart(t)
	k = testkit.MustTryAcquire(t, l, name)
	defer testkit.MustRelease(t, k)
	if k.Fence() <= last {
		t.Fatalf("TryAcquire(%q) after a step back of 8s and a restart: Fence() = %d, want above the last token %d", name, k.Fence(), last)
	}
}

// TestTokensInvertAfterStepBackAndEmptyRestart proves the documented
// exception (see "Fencing tokens" in the package documentation): a server
// without persistence forgets the tombstone when it restarts, and a step
// back of its clock then makes the next token, from TIME, go below the
// last one. This test asserts that the inversion exists.
func TestTokensInvertAfterStepBackAndEmptyRestart(t *testing.T) {
	c := testserver.NewClock(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c})
	client := r.Client(t)
	l := newLocker(t, client)
	const name = "step-back-empty"
	k := testkit.MustTryAcquire(t, l, name)
	last := k.Fence()
	testkit.MustRelease(t, k)
	c.Step(-8 * time.Second)
	r.Restart(t)
	k = testkit.MustTryAcquire(t, l, name)
	defer testkit.MustRelease(t, k)
	if k.Fence() >= last {
		t.Fatalf("TryAcquire(%q) after a step back of 8s and a restart without persistence: Fence() = %d, want below %d (the documented exception)", name, k.Fence(), last)
	}
}

// TestForwardStepKeepsLease is finding 3 of issue 23: a forward step of
// the server's clock by less than the clock bound must not end a lease
// whose holder keeps renewing it. The waiter must get the name only after
// the holder releases it.
func TestForwardStepKeepsLease(t *testing.T) {
	c := testserver.NewClock(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c})
	client := r.Client(t)
	a, b := newLocker(t, client), newLocker(t, client)
	const name, ttl = "forward-step", 1500 * time.Millisecond
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(ttl))
	got := testkit.AcquireAsync(t.Context(), b, name, dlock.WithTTL(ttl))
	testkit.Eventually(t, "waiter queued", func() bool { return queueLen(t, client, name) == 1 })
	c.Step(5 * time.Second)
	time.Sleep(3 * ttl) // the holder renews meanwhile; the waiter must wait
	if testkit.IsClosed(k.Done()) {
		t.Fatalf("holder's Done() closed after a forward step of 5s (cause %v), want it held", context.Cause(k.Context()))
	}
	releasing := time.Now()
	testkit.MustRelease(t, k)
	res := testkit.WantAcquired(t, got, name, 30*time.Second)
	defer testkit.MustRelease(t, res.Lock)
	if res.At.Before(releasing) {
		t.Fatalf("Acquire(%q) returned %v before the holder released it, want after", name, releasing.Sub(res.At))
	}
	if res.Lock.Fence() <= k.Fence() {
		t.Fatalf("Acquire(%q) Fence() = %d, want above the holder's %d", name, res.Lock.Fence(), k.Fence())
	}
}

// crashedHolder takes name on a client of its own with lease ttl and
// then closes that client, as a process that dies holding the lock:
// nothing renews or releases it. It returns the holder's token and when
// the client was closed.
func crashedHolder(t *testing.T, r *testserver.Redis, name string, ttl time.Duration) (uint64, time.Time) {
	t.Helper()
	hc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	h := mustNew(t, hc)
	t.Cleanup(func() { h.Close() })
	k := testkit.MustTryAcquire(t, h, name, dlock.WithTTL(ttl))
	hc.Close()
	return k.Fence(), time.Now()
}

// TestWaiterTakesOverCrashedHolder: a holder that stops renewing without
// releasing is taken over by a waiting Locker once the waiter has seen
// its lease unchanged for its TTL, long before the key (which lives TTL
// plus the clock bound) expires.
func TestWaiterTakesOverCrashedHolder(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	b := newLocker(t, client)
	const name, ttl = "crashed-holder", 1500 * time.Millisecond
	hc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	h := mustNew(t, hc)
	t.Cleanup(func() { h.Close() })
	k := testkit.MustTryAcquire(t, h, name, dlock.WithTTL(ttl))
	got := testkit.AcquireAsync(t.Context(), b, name, dlock.WithTTL(ttl))
	testkit.Eventually(t, "waiter queued", func() bool { return queueLen(t, client, name) == 1 })
	hc.Close()
	crashed := time.Now()
	res := testkit.WantAcquired(t, got, name, 30*time.Second)
	defer testkit.MustRelease(t, res.Lock)
	took := res.At.Sub(crashed)
	t.Logf("waiting Locker took over %v after the holder crashed (TTL %v, clock bound %v)", took, ttl, driver.DefaultClockBound)
	if took > ttl+driver.DefaultClockBound {
		t.Errorf("waiter took over %v after the crash, want before the key's own end (TTL + clock bound = %v)", took, ttl+driver.DefaultClockBound)
	}
	if res.Lock.Fence() <= k.Fence() {
		t.Errorf("Acquire(%q) Fence() = %d, want above the crashed holder's %d", name, res.Lock.Fence(), k.Fence())
	}
}

// TestFreshLockerTakesOverCrashedHolder: a Locker that arrives after a
// crashed holder's lease ran out by the server's clock (but less than
// the clock bound ago) takes the name over within about the holder's TTL
// of arriving.
func TestFreshLockerTakesOverCrashedHolder(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const name, ttl = "crashed-holder-fresh", 1500 * time.Millisecond
	fence, _ := crashedHolder(t, r, name, ttl)
	key := redislock.Key("", name)
	// Until the server's clock says the lease ran out: the key lives
	// TTL + the clock bound, so its PTTL is then at most the bound.
	testkit.Eventually(t, "lease ran out by the server's clock", func() bool {
		return client.PTTL(t.Context(), key).Val() <= driver.DefaultClockBound
	})
	b := newLocker(t, client)
	arrived := time.Now()
	k, err := b.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want the lock", name, err)
	}
	defer testkit.MustRelease(t, k)
	took := time.Since(arrived)
	t.Logf("fresh Locker took over %v after arriving (TTL %v, clock bound %v)", took, ttl, driver.DefaultClockBound)
	if took > driver.DefaultClockBound {
		t.Errorf("fresh Locker took over %v after arriving, want before the key's own end (%v)", took, driver.DefaultClockBound)
	}
	if k.Fence() <= fence {
		t.Errorf("Acquire(%q) Fence() = %d, want above the crashed holder's %d", name, k.Fence(), fence)
	}
}

// TestClockBoundSetsKeyLives: a lock's key lives its TTL plus the clock
// bound, and a released name's tombstone the bound plus one second, with
// the bound from Options.ClockBound or the URL's clock_bound.
func TestClockBoundSetsKeyLives(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl, bound = time.Second, 3 * time.Second
	viaNew, err := redislock.New(client, &redislock.Options{ClockBound: bound})
	if err != nil {
		t.Fatalf("redislock.New = %v", err)
	}
	defer viaNew.Close()
	viaURL, err := dlock.Open(t.Context(), "redis://"+r.Addr()+"?clock_bound=3s")
	if err != nil {
		t.Fatalf("dlock.Open = %v", err)
	}
	defer viaURL.Close()
	for i, l := range []*dlock.Locker{viaNew, viaURL} {
		name := "bound-" + strconv.Itoa(i)
		key := redislock.Key("", name)
		k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(ttl))
		if pttl := client.PTTL(t.Context(), key).Val(); pttl <= bound || pttl > ttl+bound {
			t.Errorf("PTTL %s of a held lock (TTL %v, bound %v) = %v, want in (%v, %v]", key, ttl, bound, pttl, bound, ttl+bound)
		}
		hs, err := l.Inspect(t.Context(), name)
		if err != nil || len(hs) != 1 || hs[0].Remaining > ttl {
			t.Errorf("Inspect(%q) = %v, %v, want one holder with at most the TTL %v remaining", name, hs, err, ttl)
		}
		testkit.MustRelease(t, k)
		if pttl := client.PTTL(t.Context(), key).Val(); pttl <= bound || pttl > bound+time.Second {
			t.Errorf("PTTL %s of a tombstone (bound %v) = %v, want in (%v, %v]", key, bound, pttl, bound, bound+time.Second)
		}
	}
}
