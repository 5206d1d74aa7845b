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
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

// downs are the ways a master of three goes down in these tests: killed
// (its port refuses connections) and stopped with SIGSTOP (its port
// accepts connections and nothing answers).
var downs = []struct {
	name string
	down func(t *testing.T, r *testserver.Redis)
}{
	{"refused", func(t *testing.T, r *testserver.Redis) { r.Kill(t) }},
	{"stopped", func(t *testing.T, r *testserver.Redis) {
		r.Pause(t)
		t.Cleanup(func() { r.Resume(t) }) // before the Lockers' Close: their steps end
	}},
}

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

// TestReleaseDeadMinority: the adversary is one master of three that goes
// down while a lock is held, its port refusing connections or silent.
// Release returns nil as soon as the two live masters freed the name, and
// another Locker takes the name at once. The fact checked for the silent
// master: when Release returns, the release command sent to it has not
// returned (Release did not wait for it; before, it waited until go-redis
// gave up on the command, 10 s here, the per-master timeout being a long
// 30 s).
func TestReleaseDeadMinority(t *testing.T) {
	for _, tc := range downs {
		t.Run(tc.name, func(t *testing.T) {
			rs := startMasters(t, 3)
			cs := masterClients(t, addrs(rs), nil)
			var returned atomic.Int64 // commands master 2's client has finished
			cs[2].AddHook(finishHook{&returned})
			l := mustNew(t, cs, &redlock.Options{NodeTimeout: 30 * time.Second})
			k := testkit.MustTryAcquire(t, l, "x", dlock.WithTTL(10*time.Second))
			tc.down(t, rs[2])
			before := returned.Load()
			start := time.Now()
			err := k.Release(t.Context())
			took, after := time.Since(start), returned.Load()
			t.Logf("Release with master 2 %s took %v", tc.name, took)
			if err != nil {
				t.Fatalf("Release with master 2 %s = %v, want nil (masters 0 and 1 freed it)", tc.name, err)
			}
			if tc.name == "stopped" && after != before {
				t.Errorf("Release with master 2 stopped returned after %d command(s) sent to master 2 returned, want it decided by masters 0 and 1 without waiting for master 2", after-before)
			}
			other := mustNew(t, cs, &redlock.Options{NodeTimeout: 200 * time.Millisecond})
			testkit.MustRelease(t, testkit.MustTryAcquire(t, other, "x", dlock.WithTTL(10*time.Second)))
		})
	}
}

// finishHook counts the commands (and pipelines) a client has finished.
type finishHook struct{ n *atomic.Int64 }

func (h finishHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h finishHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h finishHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer h.n.Add(1)
		return next(ctx, cmds)
	}
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
