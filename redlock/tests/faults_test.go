package redlock_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

func wantAbove(t *testing.T, what string, got, prev uint64) {
	t.Helper()
	if got <= prev {
		t.Fatalf("Fence() %s = %d, want above the previous token %d", what, got, prev)
	}
}

// TestKillMinority: with 2 of 5 masters killed, locks still work, held
// ones stay held, and tokens keep increasing.
func TestKillMinority(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	l := mustNew(t, cs, nil)
	prev := testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second))
	held := testkit.MustTryAcquire(t, l, "held", dlock.WithTTL(time.Second))
	rs[1].Kill(t)
	rs[3].Kill(t)
	for i := range 5 {
		f := testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second))
		wantAbove(t, fmt.Sprintf("of cycle %d after the kill", i), f, prev)
		prev = f
	}
	// Renewals (every TTL/3) keep the held lock for two TTLs.
	time.Sleep(2 * time.Second)
	if err := context.Cause(held.Context()); err != nil {
		t.Fatalf("held lock lost with 3 of 5 masters up: %v, want held", err)
	}
	testkit.WantNotAcquired(t, mustNew(t, cs, nil), "held", "while another owner holds it")
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
}

// TestKillMajority: with 3 of 5 masters killed, Acquire fails and a held
// lock's Done closes within its TTL.
func TestKillMajority(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	l := mustNew(t, cs, &redlock.Options{NodeTimeout: 300 * time.Millisecond})
	const ttl = 3 * time.Second
	held := testkit.MustTryAcquire(t, l, "held", dlock.WithTTL(ttl))
	killed := time.Now()
	for _, i := range []int{0, 2, 4} {
		rs[i].Kill(t)
	}
	select {
	case <-held.Done():
		if since := time.Since(killed); since >= ttl {
			t.Errorf("Done closed %v after the kill, want within the TTL %v", since, ttl)
		}
	case <-time.After(ttl):
		t.Fatalf("Done still open %v after 3 of 5 masters were killed, want closed within the TTL", ttl)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if k, err := mustNew(t, cs, nil).Acquire(ctx, "other", dlock.WithTTL(ttl)); err == nil || ctx.Err() != nil {
		if k != nil {
			k.Release(context.Background())
		}
		t.Fatalf("Acquire with 2 of 5 masters up = %v (ctx %v), want an error before ctx ends", err, ctx.Err())
	}
}

// TestRestartMinority is the central Redlock objection: A holds the lock
// on exactly three masters of five (it cannot reach the other two); two of
// those three restart empty. B must not win a majority with their votes
// while A's lease lasts; once A releases, B takes the lock with a higher
// token (the third master kept A's high-water mark).
func TestRestartMinority(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	opts := &redlock.Options{MaxTTL: driver.DefaultTTL}
	b := mustNew(t, cs, opts)
	prev := testkit.Cycle(t, b, "n", dlock.WithTTL(5*time.Second)) // every master's epoch starts here
	time.Sleep(1500 * time.Millisecond)                            // more than the epoch slack (1 s)

	reach := addrs(rs)
	reach[3], reach[4] = "127.0.0.1:1", "127.0.0.1:1" // A cannot reach them
	a := mustNew(t, clients(t, reach), opts)
	ka := testkit.MustTryAcquire(t, a, "n", dlock.WithTTL(driver.DefaultTTL), dlock.WithoutRenewal())
	wantAbove(t, "of A", ka.Fence(), prev)
	if n := keysLeft(t, cs, "n"); n != 3 {
		t.Fatalf("A's key is on %d masters, want 3", n)
	}

	rs[1].Restart(t)
	rs[2].Restart(t)
	testkit.WantNotAcquired(t, b, "n", "while A holds it on two restarted masters") // without the guard: 4 votes of 5
	if err := context.Cause(ka.Context()); err != nil {
		t.Fatalf("A lost its lock: %v", err)
	}

	// A frees the one master that kept its key; it cannot tell whether
	// the two it cannot reach hold it, so Release reports an error.
	if err := ka.Release(t.Context()); err == nil {
		t.Fatalf("A's Release = nil, want an error (2 masters unreachable, 2 forgot the key)")
	}
	kb := testkit.MustTryAcquire(t, b, "n", dlock.WithTTL(5*time.Second))
	wantAbove(t, "of B after A", kb.Fence(), ka.Fence())
	if n := keysLeft(t, cs, "n"); n != 5 {
		t.Errorf("B's key is on %d masters, want 5 (restarted ones get the key, they only do not vote)", n)
	}
	kb.Release(t.Context())
}

// TestRestartMinorityRenewed: a lock held on all five masters, renewed,
// survives two of them restarting empty; its renewal re-creates the key
// there, and another Locker cannot take it meanwhile.
func TestRestartMinorityRenewed(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	l := mustNew(t, cs, &redlock.Options{NodeTimeout: 500 * time.Millisecond})
	k := testkit.MustTryAcquire(t, l, "n", dlock.WithTTL(1500*time.Millisecond))
	rs[0].Restart(t)
	rs[3].Restart(t)
	testkit.WantNotAcquired(t, mustNew(t, cs, nil), "n", "while another owner holds it")
	deadline := time.Now().Add(10 * time.Second)
	for keysLeft(t, cs, "n") != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("key on %d masters 10 s after the restarts, want 5 (re-created by renewal)", keysLeft(t, cs, "n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := context.Cause(k.Context()); err != nil {
		t.Fatalf("lock lost after 2 of 5 masters restarted: %v, want held", err)
	}
	f := k.Fence()
	k.Release(t.Context())
	wantAbove(t, "after the restarts", testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second)), f)
}

// pauseWorker takes args[1] on the masters args[0] (comma-separated) with
// TTL args[2] through the driver. After writing its token back it prints
// "paused", waits for SIGUSR1 (the test stops and continues it with
// SIGSTOP and SIGCONT meanwhile), and prints the outcome.
func pauseWorker(ctx context.Context, args []string) error {
	ttl, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	var cs []redis.UniversalClient
	for _, a := range strings.Split(args[0], ",") {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		cs = append(cs, c)
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	drv, err := testhook.NewDriver(cs, func() {
		fmt.Println("paused")
		<-usr1
	})
	if err != nil {
		return err
	}
	res, err := drv.Acquire(ctx, driver.Lease{Name: args[1], Owner: "worker:1", TTL: ttl})
	fmt.Println("outcome", res.Acquired, err)
	return nil
}

// TestPausedAcquire: a client stopped (SIGSTOP) in the middle of an
// acquisition, after a majority granted and took its token, for longer
// than the TTL, does not report success when it continues.
func TestPausedAcquire(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	const ttl = 500 * time.Millisecond
	w := testworker.Start(t, "pause", strings.Join(addrs(rs), ","), "n", ttl.String())
	w.Expect(t, "paused", 30*time.Second)
	w.Signal(t, syscall.SIGSTOP)
	time.Sleep(ttl + 100*time.Millisecond)
	w.Signal(t, syscall.SIGCONT)
	// The keys have expired: another client can take the name meanwhile.
	other := testkit.MustTryAcquire(t, mustNew(t, cs, nil), "n", dlock.WithTTL(5*time.Second))
	w.Signal(t, syscall.SIGUSR1)
	if got := w.Expect(t, "outcome", 30*time.Second); got != "false <nil>" {
		t.Fatalf("paused Acquire outcome = %q, want \"false <nil>\" (not acquired)", got)
	}
	if err := context.Cause(other.Context()); err != nil {
		t.Fatalf("the other holder lost its lock: %v", err)
	}
	other.Release(t.Context())
}

// TestDroppedReply: a master that acts but whose replies are lost keeps
// no key after the release (Release goes to every master, not only those
// that answered).
func TestDroppedReply(t *testing.T) {
	rs := startMasters(t, 5)
	direct := clients(t, addrs(rs))
	proxy := testserver.StartProxy(t, rs[0].Addr())
	via := addrs(rs)
	via[0] = proxy.Addr()
	l := mustNew(t, clients(t, via), &redlock.Options{NodeTimeout: 300 * time.Millisecond})
	testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second)) // a connection whose handshake got through, and the scripts loaded
	// Release returns once a majority freed the name; the others' steps
	// may still be on their way, and a key they have yet to delete would
	// refuse the next Acquire on its master.
	testkit.Eventually(t, "the cycle's key deleted on every master", func() bool { return keysLeft(t, direct, "n") == 0 })
	proxy.DropReplies(t)
	k := testkit.MustTryAcquire(t, l, "n", dlock.WithTTL(30*time.Second))
	if n := keysLeft(t, direct, "n"); n != 5 {
		t.Fatalf("key on %d masters after Acquire, want 5 (the one whose reply was dropped too)", n)
	}
	proxy.Heal(t)
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	deadline := time.Now().Add(5 * time.Second) // far below the 30 s TTL
	for n := keysLeft(t, direct, "n"); n != 0; n = keysLeft(t, direct, "n") {
		if time.Now().After(deadline) {
			t.Fatalf("key left on %d masters 5 s after Release, want 0", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrossProcess: three processes increment a shared counter under the
// lock, through redlock:// URLs; none ever finds another inside, and no
// increment is lost.
func TestCrossProcess(t *testing.T) {
	rs := startMasters(t, 5)
	store := "redlock://" + strings.Join(addrs(rs), ",")
	counter := filepath.Join(t.TempDir(), "counter")
	const rounds = 20
	var ws []*testworker.Process
	for range 3 {
		ws = append(ws, testworker.Start(t, "count", store, "n", counter, strconv.Itoa(rounds)))
	}
	for _, w := range ws {
		if err := w.Wait(t, 2*time.Minute); err != nil {
			t.Fatalf("worker = %v, want nil; stderr:\n%s", err, w.Stderr())
		}
	}
	data, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(3*rounds) {
		t.Fatalf("counter = %s, want %d", got, 3*rounds)
	}
}

// TestTokensAboveMajorityMark: a token written back to a majority is
// exceeded by the next holder even when two of that majority are killed
// and the masters' clocks are far behind the token (here: a mark far
// above the clock, as a previous holder's token would be if its masters'
// clocks ran ahead).
func TestTokensAboveMajorityMark(t *testing.T) {
	rs := startMasters(t, 5)
	cs := clients(t, addrs(rs))
	l := mustNew(t, cs, nil)
	f := testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second))
	marks := 0
	for _, c := range cs {
		if v, _ := c.Get(t.Context(), "redlock:f:n").Uint64(); v == f {
			marks++
		}
	}
	if marks < 3 {
		t.Fatalf("token %d is the mark of %d masters, want at least 3", f, marks)
	}
	const high = uint64(1) << 52 // far above the clock in µs
	for _, c := range cs[:3] {
		if err := c.Set(t.Context(), "redlock:f:n", high, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rs[1].Kill(t)
	rs[2].Kill(t)
	wantAbove(t, "after the mark's majority lost two masters", testkit.Cycle(t, l, "n", dlock.WithTTL(5*time.Second)), high)
}

// TestPauseMinority: with 2 of 5 masters stopped (SIGSTOP), locks still
// work: a stopped master's steps are given up at the per-master timeout,
// although go-redis does not honour it (a new connection's handshake, or
// a read, waits for go-redis's own timeouts).
func TestPauseMinority(t *testing.T) {
	rs := startMasters(t, 5)
	for _, i := range []int{1, 3} {
		rs[i].Pause(t)
		defer rs[i].Resume(t)
	}
	cs := clients(t, addrs(rs)) // new clients: their first step to a stopped master is a handshake
	l := mustNew(t, cs, nil)
	const ttl = 3 * time.Second
	prev := uint64(0)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 2*ttl)
		k, err := l.Acquire(ctx, "n", dlock.WithTTL(ttl))
		cancel()
		if err != nil {
			t.Fatalf("Acquire %d with 2 of 5 masters stopped = %v, want a lock", i, err)
		}
		wantAbove(t, fmt.Sprintf("of acquisition %d", i), k.Fence(), prev)
		prev = k.Fence()
		if i == 0 {
			// Renewals (every TTL/3) keep it past its TTL.
			time.Sleep(ttl + ttl/2)
			if err := context.Cause(k.Context()); err != nil {
				t.Fatalf("lock lost with 3 of 5 masters up and 2 stopped: %v, want held", err)
			}
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release %d = %v, want nil", i, err)
		}
	}
}
