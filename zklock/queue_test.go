package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// waitQueued waits until the lock on name has n children (holder and
// waiters).
func waitQueued(t *testing.T, conn *zk.Conn, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids, _, err := conn.Children(zklock.Key("", name))
		if err == nil && len(kids) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %q has %d queued children (err %v), want %d", name, len(kids), err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitWatches waits until count reports at least n watches set: every
// waiter watches its predecessor.
func waitWatches(t *testing.T, count func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := count()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches set, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newLocker returns a Locker on conn with default options, closed at the
// end of the test.
func newLocker(t *testing.T, conn *zk.Conn) *dlock.Locker {
	t.Helper()
	return newLockerOpts(t, conn, nil)
}

func newLockerOpts(t *testing.T, conn *zk.Conn, opts *zklock.Options) *dlock.Locker {
	t.Helper()
	l, err := zklock.New(conn, opts)
	if err != nil {
		t.Fatalf("zklock.New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestQueue(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	conn := z.Conn(t, sessionTimeout)

	// A release wakes the next waiter only: with 100 waiters, handing the
	// lock down the whole queue takes 100 watch events, not 100*99/2.
	t.Run("NoHerd", func(t *testing.T) {
		const waiters = 100
		name := "herd/" + t.Name()
		holder, l := newLocker(t, conn), newLocker(t, conn)
		k, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		baseWatches := z.Watches(t)
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
		waitQueued(t, conn, name, waiters+1)
		waitWatches(t, func() int { return z.Watches(t) - baseWatches }, waiters)
		before := zklock.Wakeups()
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		select {
		case <-acquired:
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter acquired %q within 5s of the release", name)
		}
		time.Sleep(300 * time.Millisecond) // let any other woken waiter show
		if n := zklock.Wakeups() - before; n != 1 {
			t.Errorf("one release woke %d waiters, want 1", n)
		}
		close(proceed)
		wg.Wait()
		if n := zklock.Wakeups() - before; n != waiters {
			t.Errorf("handing the lock through %d waiters took %d wake-ups, want %d", waiters, n, waiters)
		}
	})

	// TryAcquire and a cancelled Acquire leave no child behind.
	t.Run("NothingLeftBehind", func(t *testing.T) {
		name := "left/" + t.Name()
		a, b := newLocker(t, conn), newLocker(t, conn)
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
		waitQueued(t, conn, name, 1)
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		waitQueued(t, conn, name, 0)
	})
}
