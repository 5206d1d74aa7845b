package redlock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

// masterClients returns a client per address with the options Open uses,
// dialing through dial; they are closed when the test ends.
func masterClients(t *testing.T, addrs []string, dial func(i int, ctx context.Context, network, addr string) (net.Conn, error)) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		o := testhook.MasterOptions(a)
		if dial != nil {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) { return dial(i, ctx, network, addr) }
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// TestDeadMasterOneDial: the adversary is a master whose port refuses
// connections (killed). With the client options Open uses, each step sent
// to it costs one dial, not go-redis's default of up to 4 tries of 5
// dials each with pauses between them, which made each step last its
// whole per-master timeout. The fact checked is the number of dials.
func TestDeadMasterOneDial(t *testing.T) {
	rs := startMasters(t, 3)
	rs[2].Kill(t)
	var dials [3]atomic.Int64
	cs := masterClients(t, addrs(rs), func(i int, ctx context.Context, network, addr string) (net.Conn, error) {
		dials[i].Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
	l, err := redlock.New(cs, nil)
	if err != nil {
		t.Fatalf("New = %v, want a Locker", err)
	}
	const cycles = 3
	start := time.Now()
	for range cycles {
		testkit.MustRelease(t, testkit.MustTryAcquire(t, l, "x", dlock.WithTTL(10*time.Second)))
	}
	t.Logf("%d acquisitions and releases with master 2 refusing took %v", cycles, time.Since(start))
	if err := l.Close(); err != nil { // waits for every step
		t.Fatalf("Close = %v, want nil", err)
	}
	// Per cycle, master 2 gets the acquire script and the release script
	// (the token is written back only where it was granted).
	if got, steps := dials[2].Load(), int64(2*cycles); got > steps {
		t.Errorf("%d dials to the refusing master for %d steps, want at most one per step", got, steps)
	} else {
		t.Logf("%d dials to the refusing master for %d steps", got, steps)
	}
}
