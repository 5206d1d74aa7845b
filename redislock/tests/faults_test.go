package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redislock"
)

// slack is the generous allowance for scheduling on a loaded machine.
const slack = 2 * time.Second

// newLocker returns a Locker on client, closed when the test ends.
func newLocker(t testing.TB, client redis.UniversalClient) *dlock.Locker {
	t.Helper()
	l := mustNew(t, client)
	t.Cleanup(func() { l.Close() })
	return l
}

// mustNew returns a Locker on client that the caller closes.
func mustNew(t testing.TB, client redis.UniversalClient) *dlock.Locker {
	t.Helper()
	l, err := redislock.New(client, nil)
	if err != nil {
		t.Fatalf("redislock.New = %v, want a Locker", err)
	}
	return l
}

func TestCrossProcessMutualExclusion(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const procs, goroutines, rounds = 3, 4, 20
	name := "cross-process"
	var workers []*testworker.Process
	for range procs {
		workers = append(workers, testworker.Start(t, "count", r.Addr(), name, strconv.Itoa(goroutines), strconv.Itoa(rounds)))
	}
	for _, w := range workers {
		w.Expect(t, "done", 60*time.Second)
	}
	want := procs * goroutines * rounds
	if n, err := client.Get(t.Context(), name+":counter").Int(); n != want || err != nil {
		t.Fatalf("counter = %d, %v; want %d (lost updates mean overlapping holders)", n, err, want)
	}
	fences, err := client.LRange(t.Context(), name+":fences", 0, -1).Result()
	if err != nil || len(fences) != want {
		t.Fatalf("fences: %d entries, %v; want %d", len(fences), err, want)
	}
	var last uint64
	for i, f := range fences {
		v, _ := strconv.ParseUint(f, 10, 64)
		if v <= last {
			t.Fatalf("fence %d of holder %d <= %d of the previous holder, want strictly increasing", v, i, last)
		}
		last = v
	}
}

func TestKilledHolderProcess(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl = 2 * time.Second
	name := "killed-holder"
	w := testworker.Start(t, "hold", "redis://"+r.Addr(), name, ttl.String())
	w.Expect(t, "acquired", 30*time.Second)
	w.Kill(t)
	killed := time.Now()

	l := newLocker(t, client)
	if k, err := l.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			k.Release(t.Context())
		}
		t.Fatalf("TryAcquire(%q) right after the holder was killed = %v, want ErrNotAcquired", name, err)
	}
	k, err := l.Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want the lock after the dead holder's lease", name, err)
	}
	waited := time.Since(killed)
	t.Logf("acquired %v after the holder was killed (TTL %v)", waited, ttl)
	// The holder renewed at least every TTL/3, so its lease ran at least
	// 2/3 TTL past the kill; the waiter must be woken by TTL + slack.
	if waited < 2*ttl/3-50*time.Millisecond || waited > ttl+slack {
		t.Fatalf("acquired %v after the kill, want between %v and %v", waited, 2*ttl/3, ttl+slack)
	}
	testkit.MustRelease(t, k)
}

func TestPausedServerClosesDoneBeforeLeaseEnds(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl = 2 * time.Second
	name := "paused"
	l := newLocker(t, client)
	k, err := l.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", name, err)
	}
	r.Pause(t)
	paused := time.Now()
	select {
	case <-k.Done():
	case <-time.After(ttl + slack):
		r.Resume(t)
		t.Fatalf("Done still open %v after Redis was paused, want closed within the lease", ttl+slack)
	}
	r.Resume(t)
	t.Logf("Done closed %v after the pause (TTL %v)", time.Since(paused), ttl)
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("context.Cause = %v, want ErrLost", cause)
	}
	// The server lease had not run out when Done closed: the key is
	// still there, with time left.
	pttl, err := client.PTTL(t.Context(), redislock.Key("", name)).Result()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL of the lock key after Done closed = %v, %v; want time left (Done must close before the server lease ends)", pttl, err)
	}
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release of the lost lock = %v, want ErrNotHeld", err)
	}
	// New locks work after the pause.
	k2, err := newLocker(t, client).Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(%q) after Resume = %v, want a lock", name, err)
	}
	testkit.MustRelease(t, k2)
}

func TestRestartedEmptyServer(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl = time.Second
	name := "restarted"
	l := newLocker(t, client)
	k, err := l.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", name, err)
	}
	r.Restart(t)
	select {
	case <-k.Done():
	case <-time.After(ttl + slack):
		t.Fatalf("Done still open %v after Redis restarted empty", ttl+slack)
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("context.Cause = %v, want ErrLost", cause)
	}
	// The restarted server has no scripts cached: acquisitions reload them.
	k2, err := newLocker(t, client).Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(%q) after the restart = %v, want a lock", name, err)
	}
	testkit.MustRelease(t, k2)
}

func TestRenewalSurvivesScriptFlush(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const ttl = time.Second
	l := newLocker(t, client)
	k, err := l.Acquire(t.Context(), "flushed", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH = %v", err)
	}
	select {
	case <-k.Done():
		t.Fatalf("Done closed after SCRIPT FLUSH (%v), want renewal to reload the script", context.Cause(k.Context()))
	case <-time.After(3 * ttl):
	}
	testkit.MustRelease(t, k)
}

func TestUnreachableServer(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	l := newLocker(t, client)

	r.Pause(t)
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()
	if _, err := l.Acquire(ctx, "paused"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire on a paused server = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > timeout+slack {
		t.Errorf("Acquire on a paused server returned after %v, want about %v", d, timeout)
	}
	r.Resume(t)

	r.Kill(t)
	start = time.Now()
	_, err := l.Acquire(t.Context(), "down")
	var netErr *net.OpError
	if !errors.As(err, &netErr) || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Acquire on a dead server = %v, want an error wrapping the network error", err)
	}
	if d := time.Since(start); d > slack {
		t.Errorf("Acquire on a dead server returned after %v, want promptly", d)
	}
}

func TestOnePubSubConnectionPerLocker(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	holder, waiter := newLocker(t, client), newLocker(t, client)
	const names = 20
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error, names)
	var queues []string
	for i := range names {
		name := fmt.Sprintf("multiplexed-%d", i)
		queues = append(queues, redislock.Key("", name)+":q")
		k, err := holder.Acquire(t.Context(), name)
		if err != nil {
			t.Fatalf("Acquire(%q) = %v", name, err)
		}
		defer k.Release(t.Context())
		go func() {
			_, err := waiter.Acquire(ctx, name)
			errs <- err
		}()
	}
	testkit.Eventually(t, "20 waiters queued", func() bool {
		n, _ := client.Exists(t.Context(), queues...).Result()
		return n == names
	})
	if n := pubsubClients(t, client); n != 2 {
		t.Errorf("%d pub/sub connections for two Lockers with %d waiters, want 2", n, names)
	}
	cancel()
	for range names {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Acquire = %v, want context.Canceled", err)
		}
	}
	// Cancelled waits leave nothing queued on the server.
	if n, err := client.Exists(t.Context(), queues...).Result(); n != 0 || err != nil {
		t.Errorf("%d queue keys left after every waiter gave up (%v), want 0", n, err)
	}
}

func pubsubClients(t *testing.T, client *redis.Client) int {
	t.Helper()
	list, err := client.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST = %v", err)
	}
	n := 0
	for _, line := range splitLines(list) {
		if containsField(line, "sub=") && !containsField(line, "sub=0") {
			n++
		}
	}
	return n
}

func TestOneRenewalLoopPerLocker(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	l := newLocker(t, client)
	const ttl, locks = time.Second, 200
	first, err := l.Acquire(t.Context(), "batched-0", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	before := runtime.NumGoroutine()
	held := []*dlock.Lock{first}
	for i := 1; i < locks; i++ {
		k, err := l.Acquire(t.Context(), fmt.Sprintf("batched-%d", i), dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		held = append(held, k)
	}
	time.Sleep(3 * ttl)
	if after := runtime.NumGoroutine(); after-before > 5 {
		t.Errorf("goroutines grew from %d to %d holding %d locks, want one renewal loop for all", before, after, locks)
	}
	for _, k := range held {
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("lock %q lost while renewed in a batch: %v", k.Name(), context.Cause(k.Context()))
		}
		testkit.MustRelease(t, k)
	}
}

// TestGrantAfterPubSubReconnect breaks a waiting Locker's pub/sub
// connection: the Locker must reconnect and resubscribe on its own, so
// that the next release wakes the waiter at once rather than at its next
// heartbeat (2 s with this lease).
func TestGrantAfterPubSubReconnect(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	holder, waiter := newLocker(t, client), newLocker(t, client)
	const name = "reconnected"
	// TryAcquire never waits, so the holder's Locker does not subscribe:
	// the only pub/sub connection is the waiter's.
	k, err := holder.TryAcquire(t.Context(), name, dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	got := testkit.AcquireAsync(t.Context(), waiter, name, dlock.WithTTL(30*time.Second))
	testkit.Eventually(t, "the waiter subscribed", func() bool { return pubsubClients(t, client) == 1 })
	if n, err := client.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Result(); n != 1 || err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1, nil", n, err)
	}
	testkit.Eventually(t, "the waiter resubscribed", func() bool { return pubsubClients(t, client) == 1 })
	released := time.Now()
	testkit.MustRelease(t, k)
	a := testkit.WantAcquired(t, got, name, slack)
	if d := a.At.Sub(released); d > 500*time.Millisecond {
		t.Errorf("waiter acquired %v after the release, want well under its 2 s heartbeat", d)
	}
	a.Lock.Release(t.Context())
}

// TestSentinelFailover promotes the replica while a lock is held, through
// go-redis's failover client. The lock was replicated before (WAIT), so it
// survives on the new master: whenever its holder's Done is still open,
// another Locker cannot take it; once freed, the next holder's fencing
// token is larger (the tombstone was replicated too), and the Locker that
// lived through the failover acquires on the new master.
func TestSentinelFailover(t *testing.T) {
	s := testserver.StartRedisSentinelReplicated(t)
	a, b := newLocker(t, s.Client(t)), newLocker(t, s.Client(t))
	const name = "failover"
	ttl := 3 * time.Second
	k, err := a.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	if n, err := s.Master.Client(t).Do(t.Context(), "WAIT", 1, 2000).Int(); n != 1 || err != nil {
		t.Fatalf("WAIT 1 = %d, %v; want the replica to have the lock", n, err)
	}
	s.Failover(t)

	// For two leases after the failover, b must not hold the lock while
	// a's Done is open.
	until := time.Now().Add(2 * ttl)
	var kb *dlock.Lock
	for kb == nil && time.Now().Before(until) {
		kb, err = b.TryAcquire(t.Context(), name, dlock.WithTTL(ttl))
		if err != nil {
			kb = nil
			time.Sleep(50 * time.Millisecond)
		}
	}
	if kb != nil {
		select {
		case <-k.Done():
			t.Logf("a lost the lock in the failover (%v); b took it after its lease", context.Cause(k.Context()))
		default:
			t.Fatalf("b acquired %q (fence %d) while a's Done was open (fence %d)", name, kb.Fence(), k.Fence())
		}
	} else {
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("a's Done closed (%v) but b could not take the lock in %v", context.Cause(k.Context()), 2*ttl)
		}
		testkit.MustRelease(t, k) // on the new master
		if kb, err = b.TryAcquire(t.Context(), name, dlock.WithTTL(ttl)); err != nil {
			t.Fatalf("TryAcquire after a released = %v", err)
		}
	}
	if kb.Fence() <= k.Fence() {
		t.Errorf("fence after the failover %d, want more than %d", kb.Fence(), k.Fence())
	}
	testkit.MustRelease(t, kb)
	k2, err := a.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire on the new master = %v", err)
	}
	if k2.Fence() <= kb.Fence() {
		t.Errorf("fence %d after %d, want it larger", k2.Fence(), kb.Fence())
	}
	testkit.MustRelease(t, k2)
}

// TestStaleGrantAfterPartition partitions a waiter right after its queued
// attempt, for longer than the TTL: the holder's release hands the lock to
// the partitioned waiter, that lease runs out unused, and a third Locker
// takes the name. On heal the waiter's held heartbeat and the old pub/sub
// grant both arrive; the grant is stale, and the waiter's Acquire must not
// return a lock while the third holds the name (and a lock it returns
// later must carry a larger fence).
func TestStaleGrantAfterPartition(t *testing.T) {
	r := testserver.StartRedis(t)
	direct := r.Client(t)
	p := testserver.StartProxy(t, r.Addr())
	const rounds = 3 // before the fix, every round failed (5 of 5)
	for i := range rounds {
		staleGrantRound(t, direct, p, fmt.Sprintf("stale-grant-%d", i))
	}
}

func staleGrantRound(t *testing.T, direct *redis.Client, p *testserver.Proxy, name string) {
	t.Helper()
	const ttl = time.Second
	// The waiter's client goes through the proxy; the others' do not.
	// TryAcquire does not subscribe, so the waiter's Locker holds the only
	// pub/sub connection.
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer viaProxy.Close()
	holder, waiter := newLocker(t, direct), newLocker(t, viaProxy)
	// The third Locker waits (it subscribes), and is closed at the end of
	// the round, so that the next round counts only its own waiter's
	// pub/sub connection.
	third := mustNew(t, direct)
	defer third.Close()
	kh, err := holder.TryAcquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want the lock", name, err)
	}
	got := testkit.AcquireAsync(t.Context(), waiter, name, dlock.WithTTL(ttl))
	testkit.Eventually(t, "the waiter queued and subscribed", func() bool {
		return queueLen(t, direct, name) == 1 && pubsubClients(t, direct) == 1
	})
	p.Partition(t)
	testkit.MustRelease(t, kh)
	if v, err := direct.Get(t.Context(), redislock.Key("", name)).Result(); err != nil || strings.HasPrefix(v, "|") {
		t.Fatalf("GET after the release = %q, %v; want the lock handed to the partitioned waiter", v, err)
	}
	// The grant's key outlives its lease by the clock bound: the third
	// Locker takes it over once it has seen it unchanged for its TTL.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	kt, err := third.Acquire(ctx, name, dlock.WithTTL(10*ttl))
	cancel()
	if err != nil {
		t.Fatalf("%s: the third Locker's Acquire after the grant ran out = %v, want the lock", name, err)
	}
	p.Heal(t)
	// For a few heartbeats after the heal, the waiter must not return a lock.
	select {
	case a := <-got:
		if a.Err == nil {
			t.Errorf("%s: waiter's Acquire returned fence %d (Done closed: %v) while the third Locker holds the name with fence %d",
				name, a.Lock.Fence(), testkit.IsClosed(a.Lock.Done()), kt.Fence())
			a.Lock.Release(t.Context())
			testkit.MustRelease(t, kt)
			return
		}
		t.Logf("%s: waiter's Acquire failed after the heal: %v", name, a.Err)
		testkit.MustRelease(t, kt)
		return
	case <-time.After(3 * ttl):
	}
	if testkit.IsClosed(kt.Done()) {
		t.Fatalf("%s: the third Locker lost the lock: %v", name, context.Cause(kt.Context()))
	}
	testkit.MustRelease(t, kt)
	a := testkit.WantAcquired(t, got, name, 5*time.Second)
	if a.Lock.Fence() <= kt.Fence() {
		t.Errorf("%s: waiter's fence %d after the third's %d, want larger", name, a.Lock.Fence(), kt.Fence())
	}
	a.Lock.Release(t.Context())
}
