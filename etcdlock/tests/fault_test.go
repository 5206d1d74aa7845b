package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testkit"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

func waitDone(t *testing.T, k *dlock.Lock, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-k.Done():
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("%s: context.Cause = %v, want ErrLost", what, cause)
		}
	case <-time.After(limit):
		t.Fatalf("%s: holder's Done still open after %v", what, limit)
	}
}

// holderLease returns the lease of the key holding name.
func holderLease(t *testing.T, cli *clientv3.Client, name string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdlock.Key("", name), clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("Get(%q) = %v, %v; want the holder's key", etcdlock.Key("", name), resp, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func TestFaults(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	const session = 3 * time.Second // the holders' lease TTL

	// Another client revokes the holder's session lease: the holder's Done
	// closes within a keep-alive interval and the next waiter gets the
	// lock.
	t.Run("LeaseRevoked", func(t *testing.T) {
		name := "revoked/" + t.Name()
		holder := newLocker(t, cli, &etcdlock.Options{SessionTTL: session})
		waiter := newLocker(t, cli, nil)
		k, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		got := testkit.AcquireAsync(t.Context(), waiter, name)
		testkit.WantWaiting(t, got, name)
		if _, err := cli.Revoke(t.Context(), holderLease(t, cli, name)); err != nil {
			t.Fatalf("Revoke = %v", err)
		}
		r := testkit.WantAcquired(t, got, name, 5*time.Second)
		if r.Lock.Fence() <= k.Fence() {
			t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), k.Fence())
		}
		waitDone(t, k, session/3+2*time.Second, "after the lease was revoked")
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Release of the lost lock = %v, want ErrNotHeld", err)
		}
		if err := r.Lock.Release(t.Context()); err != nil {
			t.Errorf("waiter's Release = %v", err)
		}
		// The holder's Locker works again, on a new lease.
		k2, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) after the revocation = %v", name, err)
		}
		if err := k2.Release(t.Context()); err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	// A holder process killed with SIGKILL keeps its lock until the server
	// expires its lease; then the next waiter gets it.
	t.Run("HolderKilled", func(t *testing.T) {
		name := "killed/" + t.Name()
		cmd, fence := startHolder(t, e.Addr(), name, session)
		waiter := newLocker(t, cli, nil)
		got := testkit.AcquireAsync(t.Context(), waiter, name)
		testkit.WantWaiting(t, got, name)
		cmd.Kill(t)
		killed := time.Now()
		r := testkit.WantAcquired(t, got, name, 2*session+5*time.Second)
		d := r.At.Sub(killed)
		t.Logf("the waiter acquired %v after the holder was killed (lease TTL %v)", d, session)
		// The holder renewed its lease at most a third of its TTL before
		// the kill.
		if d < session/2 {
			t.Errorf("the waiter acquired %v after the kill, before the holder's %v lease can have expired", d, session)
		}
		if r.Lock.Fence() <= fence {
			t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), fence)
		}
		if err := r.Lock.Release(t.Context()); err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	// The server dies briefly and comes back over its data while waiters
	// queue: the lease outlives the outage, the holder keeps its lock, and
	// the waiters then get it one at a time, in order.
	t.Run("ShortOutage", func(t *testing.T) {
		name := "short/" + t.Name()
		holder := newLocker(t, cli, nil) // a lease of driver.DefaultTTL (30 s), longer than the outage
		k, w1, w2 := queue(t, cli, holder, name)
		e.Kill(t)
		time.Sleep(500 * time.Millisecond)
		e.Restart(t)
		testkit.WantWaiting(t, w1, name)
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := k.Refresh(t.Context())
			if err == nil {
				break
			}
			if errors.Is(err, dlock.ErrNotHeld) || time.Now().After(deadline) {
				t.Fatalf("Refresh after the restart = %v, want nil", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
		handOn(t, name, k, w1, w2)
	})

	// The server stays down longer than the holder's lease can be trusted:
	// the holder's Done closes; after the restart the waiters get the
	// lock one at a time, in order.
	t.Run("LongOutage", func(t *testing.T) {
		name := "long/" + t.Name()
		holder := newLocker(t, cli, &etcdlock.Options{SessionTTL: session})
		k, w1, w2 := queue(t, cli, holder, name)
		e.Kill(t)
		waitDone(t, k, session+2*time.Second, "server down")
		testkit.WantWaiting(t, w1, name)
		e.Restart(t)
		handOn(t, name, k, w1, w2)
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Release of the lock lost in the outage = %v, want ErrNotHeld", err)
		}
	})
}

// queue takes name with holder and queues two waiters on new Lockers.
func queue(t *testing.T, cli *clientv3.Client, holder *dlock.Locker, name string) (*dlock.Lock, <-chan testkit.Acquired, <-chan testkit.Acquired) {
	t.Helper()
	k, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v", name, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	w1 := testkit.AcquireAsync(ctx, newLocker(t, cli, nil), name)
	sessionlocktest.WaitEntries(t, queueOn(nil, cli), name, 2)
	w2 := testkit.AcquireAsync(ctx, newLocker(t, cli, nil), name)
	sessionlocktest.WaitEntries(t, queueOn(nil, cli), name, 3)
	return k, w1, w2
}

// handOn checks that the first waiter gets name (with a higher token than
// k), then the second one, once the first releases.
func handOn(t *testing.T, name string, k *dlock.Lock, w1, w2 <-chan testkit.Acquired) {
	t.Helper()
	r1 := testkit.WantAcquired(t, w1, name, 20*time.Second)
	if r1.Lock.Fence() <= k.Fence() {
		t.Errorf("first waiter's Fence = %d, want > %d", r1.Lock.Fence(), k.Fence())
	}
	testkit.WantWaiting(t, w2, name)
	if err := r1.Lock.Release(t.Context()); err != nil {
		t.Errorf("first waiter's Release = %v", err)
	}
	r2 := testkit.WantAcquired(t, w2, name, 5*time.Second)
	if r2.Lock.Fence() <= r1.Lock.Fence() {
		t.Errorf("second waiter's Fence = %d, want > %d", r2.Lock.Fence(), r1.Lock.Fence())
	}
	if err := r2.Lock.Release(t.Context()); err != nil {
		t.Errorf("second waiter's Release = %v", err)
	}
}

// startHolder starts a worker process holding name through its own session
// lease and returns it once it holds the lock, with the lock's fencing
// token. The lock's TTL is long: only the lease's end frees the lock.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*testworker.Process, uint64) {
	t.Helper()
	return testworker.StartHolder(t, fmt.Sprintf("etcd://%s?session_ttl=%s", addr, session), name, time.Minute)
}
