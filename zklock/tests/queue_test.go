package zklock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

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

// queueOn describes the locks' queues through conn, on z, for the shared
// tests.
func queueOn(z *testserver.ZooKeeper, conn *zk.Conn) sessionlocktest.Queue {
	return sessionlocktest.Queue{
		NewLocker: func(t *testing.T) *dlock.Locker { return newLocker(t, conn) },
		NewLockerRetry: func(t *testing.T, maxRetry time.Duration) *dlock.Locker {
			return newLockerOpts(t, conn, &zklock.Options{MaxRetryInterval: maxRetry})
		},
		Entries: func(t *testing.T, name string) int {
			kids, _, err := conn.Children(zklock.Key("", name))
			if err != nil {
				return 0
			}
			return len(kids)
		},
		Watches: func(t *testing.T) int { return z.Watches(t) },
		Wakeups: testhook.Wakeups,
	}
}

func TestMain(m *testing.M) { sessionlocktest.Main(m) }

func TestQueue(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	sessionlocktest.TestQueue(t, queueOn(z, z.Conn(t, sessionTimeout)))
}

func TestModes(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	sessionlocktest.TestModes(t, queueOn(z, z.Conn(t, sessionTimeout)))
}

// The adversary is a holder that leaves between a waiter's create and its
// first read of the queue (a race the conformance suite met on a loaded
// machine): the read finds the waiter first, yet it was queued behind
// the holder, and its AcquireDone must say so (Ahead 1, Contended), as it
// says for a release that comes after the read.
func TestHolderLeavesBeforeFirstRead(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	holder, waiter := newLocker(t, z.Conn(t, sessionTimeout)), newLocker(t, z.Conn(t, sessionTimeout))
	const name = "leaves-before-read"
	k, err := holder.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	f := func(path string) {
		if strings.HasPrefix(path, zklock.Key("", name)+"/") && !released.Swap(true) {
			if err := k.Release(context.Background()); err != nil {
				t.Errorf("holder's Release = %v", err)
			}
		}
	}
	testhook.AfterCreate.Store(&f)
	t.Cleanup(func() { testhook.AfterCreate.Store(nil) })
	var done []hook.AcquireDone
	waiter.AddHook(hook.Hook{AcquireDone: func(_ context.Context, e hook.AcquireDone) { done = append(done, e) }})
	w, err := waiter.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(context.Background())
	if !released.Load() {
		t.Fatal("the holder was not released between the waiter's create and its read")
	}
	if len(done) != 1 || done[0].Outcome != hook.Acquired || done[0].Ahead != 1 || !done[0].Contended {
		t.Fatalf("AcquireDone events = %+v; want one acquired, Ahead 1, Contended", done)
	}
}
