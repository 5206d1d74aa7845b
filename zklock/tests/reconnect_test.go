package zklock_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// The adversary is a server restart under load: 32 goroutines keep
// acquiring and releasing through one Locker while the server is killed
// and started again. The connection must not dial in a storm: the zk
// client tries each server once, then waits a second before the next
// round (a fixed pause, without jitter), whatever dlock's waiters do.
// Slowness only lowers the count of dials, so the bound (one a second of
// outage, plus two) cannot fail by timing.
func TestReconnectPace(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	var dials atomic.Int64
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
	const session = 10 * time.Second // outlives the restart
	conn, events, err := zk.Connect([]string{z.Addr()}, session, zk.WithDialer(zklock.BoundedDialer(session, dial)), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect = %v", err)
	}
	t.Cleanup(conn.Close)
	waitSession(t, events)
	l := newLocker(t, conn)
	ctx, stop := context.WithCancel(t.Context())
	var (
		wg     sync.WaitGroup
		rounds atomic.Int64 // acquisitions that returned
	)
	for i := range 32 {
		wg.Go(func() {
			name := fmt.Sprintf("pace/%d", i%4)
			for ctx.Err() == nil {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if k, err := l.Acquire(actx, name); err == nil {
					_ = k.Release(actx) // may fail while the server is down
				}
				cancel()
				rounds.Add(1)
			}
		})
	}
	testkit.Eventually(t, "the load running", func() bool { return rounds.Load() >= 32 })
	before := dials.Load()
	z.Kill(t)
	killed := time.Now()
	time.Sleep(3 * time.Second)
	z.Restart(t)
	// Not from events: the client drops events when its small buffer is
	// full, as it is after a second of dials.
	for deadline := time.Now().Add(30 * time.Second); conn.State() != zk.StateHasSession; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("conn.State() 30s after the restart = %v, want StateHasSession", conn.State())
		}
	}
	outage := time.Since(killed)
	n := dials.Load() - before
	stop()
	wg.Wait()
	t.Logf("%d dials in an outage of %v", n, outage.Round(time.Millisecond))
	if limit := int64(outage.Seconds()) + 2; n > limit {
		t.Errorf("dials during an outage of %v = %d, want at most %d", outage, n, limit)
	}
	// Bounded: an entry left queued by the outage would otherwise hang
	// the test until the suite's timeout (CI's run of stop 41 hung so for
	// 19 minutes; TestLostCreateLeavesNothing pins that case down).
	actx, acancel := context.WithTimeout(t.Context(), testkit.Patience)
	defer acancel()
	k, err := l.Acquire(actx, "pace/0")
	if err != nil {
		kids, _, _ := conn.Children(zklock.Key("", "pace/0"))
		t.Fatalf("Acquire(%q) after the restart = %v; children of its parent: %v", "pace/0", err, kids)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Errorf("Release(%q) after the restart = %v", "pace/0", err)
	}
}

// waitSession waits for the connection whose events these are to have a
// session.
func waitSession(t *testing.T, events <-chan zk.Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return
			}
		case <-timeout:
			t.Fatalf("no zookeeper session within 30s")
		}
	}
}
