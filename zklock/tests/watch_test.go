package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// The adversary is contention itself: with many short holds queued on a
// few names, a waiter's predecessor is often gone by the time the waiter
// sets its watch on it. A watch set on a znode that no longer exists (an
// exists-watch) stays on the server, and its channel in the client's
// watcher map, until that path is created again, which a sequential
// child's path never is: the soak test of issue 24 saw the server's watch
// count grow by 20,000 a minute. After thousands of queued waits, every
// wait has ended, so no watch may remain on the server, no channel in the
// client and no goroutine in the process.
func TestWatchesDoNotOutliveWaits(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	const lockers = 4
	conns := make([]*zk.Conn, lockers)
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		conns[i] = z.Conn(t, sessionTimeout)
		ls[i] = newLocker(t, conns[i])
	}
	baseWatches, baseGoroutines := z.Watches(t), settledGoroutines(0)
	wakeups := testhook.Wakeups()
	contend(t, ls, 40, 40)
	waits := testhook.Wakeups() - wakeups
	checkNamesLeft(t, z, conns[0], 40) // at the server's default settings
	if waits < 1000 {
		t.Fatalf("the workload served %d queued waits, want at least 1000 for the test to mean anything", waits)
	}
	var server int
	deadline := time.Now().Add(10 * time.Second)
	for server = z.Watches(t); server > baseWatches && time.Now().Before(deadline); server = z.Watches(t) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d queued waits; server watches %d before, %d after", waits, baseWatches, server)
	if server != baseWatches {
		t.Errorf("Watches() after %d queued waits = %d, want the baseline %d", waits, server, baseWatches)
	}
	for i, c := range conns {
		if n := clientWatches(t, c); n != 0 {
			t.Errorf("conn %d: clientWatches() after %d queued waits = %d, want 0", i, waits, n)
		}
	}
	n := settledGoroutines(baseGoroutines)
	t.Logf("goroutines %d before, %d after", baseGoroutines, n)
	if n > baseGoroutines {
		t.Errorf("runtime.NumGoroutine() after %d queued waits = %d, want at most the baseline %d", waits, n, baseGoroutines)
	}
}

// contend runs 32 goroutines on each of ls, each acquiring rounds times a
// random one of names lock names (a tenth of them taken shared or
// exclusive at random, another tenth semaphores of 3 permits, the rest
// exclusive) and releasing it after up to a millisecond.
func contend(t *testing.T, ls []*dlock.Locker, names, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, l := range ls {
		for range 32 {
			wg.Go(func() {
				for range rounds {
					i := rand.IntN(names)
					name := fmt.Sprintf("contend/%d", i)
					var opts []dlock.Option
					switch {
					case i%10 == 0:
						opts = append(opts, dlock.WithLimit(3))
					case i%10 == 1 && rand.IntN(2) == 0:
						opts = append(opts, dlock.Shared())
					}
					k, err := l.Acquire(t.Context(), name, opts...)
					if err != nil {
						t.Errorf("Acquire(%q) = %v", name, err)
						return
					}
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
					if err := k.Release(t.Context()); err != nil {
						t.Errorf("Release(%q) = %v", name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// settledGoroutines returns runtime.NumGoroutine: with want 0 once it has
// not changed for a second, otherwise once it is at most want. It gives
// up after 20 s: the core's idle background workers exit after 5 s.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(20 * time.Second)
	n, still := runtime.NumGoroutine(), 0
	for (want == 0 && still < 20 || want > 0 && n > want) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		last := n
		if n = runtime.NumGoroutine(); n == last {
			still++
		} else {
			still = 0
		}
	}
	return n
}

// clientWatches returns how many watch channels conn's watcher map holds:
// the go-zookeeper client keeps one per watch set, until its event comes
// or the connection closes. It reads the client's unexported fields under
// the client's own lock.
func clientWatches(t *testing.T, conn *zk.Conn) int {
	t.Helper()
	v := reflect.ValueOf(conn).Elem()
	mu, watchers := v.FieldByName("watchersLock"), v.FieldByName("watchers")
	if !mu.IsValid() || !watchers.IsValid() || watchers.Kind() != reflect.Map {
		t.Fatalf("zk.Conn has no watchersLock and watchers map: the go-zookeeper version changed")
	}
	lock := (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr()))
	lock.Lock()
	defer lock.Unlock()
	n := 0
	for it := watchers.MapRange(); it.Next(); {
		n += it.Value().Len()
	}
	return n
}

// The adversary is a waiter that gives up by its ctx again and again
// while one holder keeps the name (Acquire with a timeout, in a loop,
// against a lock held for days): each attempt watches the same holder's
// child. The server keeps one watch for it; the client must not keep a
// channel per attempt either.
func TestTimedOutWaitsShareOneWatch(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	holderConn, conn := z.Conn(t, sessionTimeout), z.Conn(t, sessionTimeout)
	const name = "timeouts"
	k, err := newLocker(t, holderConn).TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v", name, err)
	}
	l := newLocker(t, conn)
	const attempts = 50
	wakeups := testhook.Wakeups()
	for range attempts {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		if _, err := l.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire(%q) while held = %v, want DeadlineExceeded", name, err)
		}
		cancel()
	}
	if n := testhook.Wakeups() - wakeups; n != 0 {
		t.Fatalf("%d waits woke while the holder held, want 0", n)
	}
	if n := z.Watches(t); n != 1 {
		t.Errorf("Watches() after %d timed-out waits on a held name = %d, want 1 (on the holder's child)", attempts, n)
	}
	if n := clientWatches(t, conn); n != 1 {
		t.Errorf("clientWatches() after %d timed-out waits on a held name = %d, want 1", attempts, n)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for clientWatches(t, conn) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := clientWatches(t, conn); n != 0 {
		t.Errorf("clientWatches() after the holder released = %d, want 0", n)
	}
}
