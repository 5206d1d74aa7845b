package etcdlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// waitQueued waits until the lock on name has n keys (holder and
// waiters).
func waitQueued(t *testing.T, cli *clientv3.Client, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := cli.Get(t.Context(), etcdlock.Key("", name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %q has %v queued keys (err %v), want %d", name, resp, err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQueue(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)

	// A release wakes the next waiter only: with 100 waiters, handing the
	// lock down the whole queue takes 100 delete events, not 100*99/2.
	t.Run("NoHerd", func(t *testing.T) {
		const waiters = 100
		name := "herd/" + t.Name()
		holder, l := newLocker(t, cli, nil), newLocker(t, cli, nil)
		k, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		baseWatchers := e.Watchers(t)
		proceed := make(chan struct{})
		acquired := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				k, err := l.Acquire(t.Context(), name)
				if err != nil {
					t.Errorf("waiter %d: Acquire(%q) = %v", i, name, err)
					return
				}
				acquired <- i
				<-proceed
				if err := k.Release(t.Context()); err != nil {
					t.Errorf("waiter %d: Release = %v", i, err)
				}
			})
		}
		waitQueued(t, cli, name, waiters+1)
		// Every waiter watches its predecessor.
		deadline := time.Now().Add(10 * time.Second)
		for e.Watchers(t)-baseWatchers < waiters {
			if time.Now().After(deadline) {
				t.Fatalf("%d watchers, want %d", e.Watchers(t)-baseWatchers, waiters)
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := etcdlock.Wakeups()
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		select {
		case <-acquired:
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter acquired %q within 5s of the release", name)
		}
		time.Sleep(300 * time.Millisecond) // let any other woken waiter show
		if n := etcdlock.Wakeups() - before; n != 1 {
			t.Errorf("one release woke %d waiters, want 1", n)
		}
		close(proceed)
		wg.Wait()
		if n := etcdlock.Wakeups() - before; n != waiters {
			t.Errorf("handing the lock through %d waiters took %d wake-ups, want %d", waiters, n, waiters)
		}
	})

	// TryAcquire and a cancelled Acquire leave no key behind.
	t.Run("NothingLeftBehind", func(t *testing.T) {
		name := "left/" + t.Name()
		a, b := newLocker(t, cli, nil), newLocker(t, cli, nil)
		k, err := a.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		if _, err := b.TryAcquire(t.Context(), name); err == nil {
			t.Fatalf("second TryAcquire(%q) succeeded", name)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, name); err == nil {
			t.Fatalf("Acquire(%q) with a timeout succeeded", name)
		}
		waitQueued(t, cli, name, 1)
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		waitQueued(t, cli, name, 0)
	})
}
