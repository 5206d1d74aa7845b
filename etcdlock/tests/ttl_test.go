package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// grantedTTL returns the TTL the server granted lease id, in seconds.
func grantedTTL(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(t.Context(), id)
	if err != nil {
		t.Fatalf("TimeToLive(%x) = %v", id, err)
	}
	return resp.GrantedTTL
}

// The adversary is kill -9 of a holder that took its lock WithTTL(3s), as
// a user of Lead or `dlock run --ttl 3` does: its key must go when that
// TTL runs out, not after a session of its own (10 s before issue 27).
// The holder's key is on a lease granted 3 s, and a waiter gets the lock.
func TestDeadHolderFreesAfterItsTTL(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	name := testkit.UniqueName(t, "ttl")
	holder, _ := testworker.StartHolder(t, "etcd://"+e.Addr(), name, 3*time.Second)
	if got := grantedTTL(t, cli, holderLease(t, cli, name)); got != 3 {
		t.Fatalf("the lease of a WithTTL(3s) holder's key was granted %d s, want 3 s", got)
	}
	waiter := newLocker(t, cli, nil)
	got := testkit.AcquireAsync(t.Context(), waiter, name, dlock.WithTTL(3*time.Second))
	testkit.WantWaiting(t, got, name)
	holder.Kill(t)
	died := time.Now()
	r := testkit.WantAcquired(t, got, name, 20*time.Second)
	took := r.At.Sub(died)
	t.Logf("a waiter took over %v after kill -9 of a WithTTL(3s) holder", took.Round(100*time.Millisecond))
	if took > 8*time.Second {
		t.Errorf("takeover after kill -9 of a WithTTL(3s) holder took %v, want well under the former 10 s session", took)
	}
	testkit.MustRelease(t, r.Lock)
}

// The adversary is a lease revoked on the server (an operator, or a lease
// the server lost) while a Locker holds locks of two TTLs: only the locks
// on that lease are lost. Locks of one TTL share a lease; another TTL
// has its own.
func TestLeasePerTTL(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	l := newLocker(t, cli, nil)
	a := testkit.MustAcquire(t, l, "a", dlock.WithTTL(3*time.Second))
	b := testkit.MustAcquire(t, l, "b", dlock.WithTTL(5*time.Second))
	c := testkit.MustAcquire(t, l, "c", dlock.WithTTL(2500*time.Millisecond)) // rounded up: 3 s
	la, lb, lc := holderLease(t, cli, "a"), holderLease(t, cli, "b"), holderLease(t, cli, "c")
	if la != lc || la == lb {
		t.Fatalf("leases of a (3s), b (5s), c (2.5s) = %x, %x, %x; want a's and c's the same, b's another", la, lb, lc)
	}
	if ga, gb := grantedTTL(t, cli, la), grantedTTL(t, cli, lb); ga != 3 || gb != 5 {
		t.Fatalf("granted TTLs of a's and b's leases = %d s, %d s; want 3 s, 5 s", ga, gb)
	}
	if _, err := cli.Revoke(t.Context(), lb); err != nil {
		t.Fatalf("Revoke(b's lease) = %v", err)
	}
	waitDone(t, b, 10*time.Second, "b, whose lease was revoked")
	for _, k := range []*dlock.Lock{a, c} {
		if err := k.Refresh(t.Context()); err != nil {
			t.Errorf("Refresh(%q) after another TTL's lease was revoked = %v, want nil", k.Name(), err)
		}
		if testkit.IsClosed(k.Done()) {
			t.Errorf("%q's Done closed when another TTL's lease was revoked", k.Name())
		}
	}
	if got := holderLease(t, cli, "a"); got != la {
		t.Errorf("a's key is on lease %x after b's was revoked, want still %x", got, la)
	}
	testkit.MustRelease(t, a)
	testkit.MustRelease(t, c)
}

// The adversary is a Locker used with TTLs it then stops using: it must
// not keep a lease (and a keep-alive loop) per TTL forever. A lease with
// no key attached is revoked after a few renewals; the Locker grants
// another when the TTL is used again.
func TestIdleLeaseRevoked(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	l := newLocker(t, cli, nil)
	testkit.MustRelease(t, testkit.MustAcquire(t, l, "once", dlock.WithTTL(2*time.Second)))
	leases := func() int {
		resp, err := cli.Leases(t.Context())
		if err != nil {
			t.Fatalf("Leases = %v", err)
		}
		return len(resp.Leases)
	}
	if n := leases(); n != 1 {
		t.Fatalf("after one acquisition: %d leases, want 1", n)
	}
	testkit.Eventually(t, "the idle 2 s lease revoked", func() bool { return leases() == 0 })
	k := testkit.MustAcquire(t, l, "again", dlock.WithTTL(2*time.Second))
	if n := leases(); n != 1 {
		t.Errorf("after acquiring again: %d leases, want 1", n)
	}
	testkit.MustRelease(t, k)
}
