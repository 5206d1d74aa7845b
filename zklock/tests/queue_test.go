package zklock_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
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

// waitQueued waits until the lock on name has n children (holder and
// waiters).
func waitQueued(t *testing.T, conn *zk.Conn, name string, n int) {
	t.Helper()
	sessionlocktest.WaitEntries(t, queueOn(nil, conn), name, n)
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
