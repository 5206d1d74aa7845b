package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testworker"
)

// Leader is the worker of the failover measurement: args are a store URL,
// a name and a TTL. It leads the name with Locker.Lead and prints
// "leading <ns>" (the host's monotonic clock, see now) each time its fn
// starts, then holds leadership until it is killed.
func Leader(ctx context.Context, args []string) error {
	l, name, ttl, err := testworker.OpenStore(ctx, "leader", args)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println("ready")
	err = l.Lead(ctx, name, func(lctx context.Context) error {
		fmt.Println("leading", now())
		<-lctx.Done()
		return lctx.Err()
	}, dlock.WithTTL(ttl))
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// Failover measures rounds failovers of an election on target: while one
// Leader process leads and another campaigns, the leader is killed with
// SIGKILL, and the time from the kill to the campaigner's fn starting is
// one measurement. A dead leader cannot release, so each failover waits
// for its lease (TTL) or session (target.DeadHolderLease) to run out; the
// measurement shows what the store adds to that. The kill comes at a
// random point of the leader's renewal period, so a failover takes
// between TTL×2/3 and TTL plus the store's own delay (a session timeout,
// for ZooKeeper and etcd, instead of the TTL). The target must run
// workers as processes (not InProcess).
func Failover(t testing.TB, target Target, ttl time.Duration, rounds int) []time.Duration {
	t.Helper()
	if target.InProcess {
		t.Fatalf("failover of %s: a kill -9 needs worker processes", target.Name)
	}
	url := target.URL(target.Upstream)
	name := "failover/" + strconv.FormatInt(now(), 36)
	start := func() *testworker.Process {
		p := testworker.Start(t, "jepsen-leader", url, name, ttl.String())
		p.Expect(t, "ready", 30*time.Second)
		return p
	}
	leader := start()
	leader.Expect(t, "leading", 30*time.Second)
	var ds []time.Duration
	for range rounds {
		next := start()
		// Let the campaigner try once and start waiting; then kill at a
		// random point of the leader's renewal period (TTL/3), so that
		// the rounds sample how much of its lease it had left.
		time.Sleep(ttl/4 + rand.N(ttl/3))
		killed := now()
		leader.Kill(t)
		at, err := strconv.ParseInt(next.Expect(t, "leading", 10*max(ttl, target.DeadHolderLease)+30*time.Second), 10, 64)
		if err != nil {
			t.Fatalf("failover of %s: leader printed a bad time: %v", target.Name, err)
		}
		ds = append(ds, time.Duration(at-killed))
		leader = next
	}
	return ds
}
