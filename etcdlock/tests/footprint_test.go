package etcdlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// serverState returns how many keys the whole keyspace holds and how
// many leases the server has.
func serverState(t *testing.T, cli *clientv3.Client) (keys, leases int) {
	t.Helper()
	resp, err := cli.Get(t.Context(), "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get(every key, count) = %v", err)
	}
	ls, err := cli.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases = %v", err)
	}
	return int(resp.Count), len(ls.Leases)
}

// The adversary is state that piles up per name: keys (or counters for
// tokens) left after release, or leases left after Close. After 600
// names were used in every mode, with waits given up, the store holds no
// key at all and one lease (the Locker's session); after Close, none.
// A holder killed with SIGKILL leaves its key and lease for its session
// TTL only.
func TestNothingStaysPerName(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	l, other := newLocker(t, cli, nil), newLocker(t, cli, nil)
	for i := range 100 {
		testkit.MustRelease(t, testkit.MustAcquire(t, l, fmt.Sprintf("x/%d", i)))
		testkit.MustRelease(t, testkit.MustAcquire(t, l, fmt.Sprintf("s/%d", i), dlock.Shared()))
		testkit.MustRelease(t, testkit.MustAcquire(t, l, fmt.Sprintf("p/%d", i), dlock.WithLimit(3)))
	}
	k := testkit.MustAcquire(t, other, "busy")
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		if _, err := l.Acquire(ctx, "busy"); err == nil {
			t.Fatalf("Acquire(busy) held by another = nil, want the context's error")
		}
		cancel()
	}
	testkit.MustRelease(t, k)
	if keys, leases := serverState(t, cli); keys != 0 || leases != 2 {
		t.Errorf("after 300 names used and released: %d keys, %d leases; want 0 keys, 2 leases (the sessions)", keys, leases)
	}
	testkit.MustAcquire(t, l, "held at Close")
	l.Close()
	other.Close()
	if keys, leases := serverState(t, cli); keys != 0 || leases != 0 {
		t.Errorf("after Close: %d keys, %d leases; want 0, 0", keys, leases)
	}

	cmd, _ := startHolder(t, e.Addr(), "held by the dead", 2*time.Second)
	if keys, leases := serverState(t, cli); keys != 1 || leases != 1 {
		t.Fatalf("while a worker holds a lock: %d keys, %d leases; want 1, 1", keys, leases)
	}
	cmd.Kill(t) // kill -9: no keep-alive, no revoke
	died := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys, leases := serverState(t, cli)
		if keys == 0 && leases == 0 {
			t.Logf("a dead holder's key and lease went %v after it died", time.Since(died).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after a holder with a 2s session died: %d keys, %d leases; want 0, 0", keys, leases)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
