package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// queueOn describes the locks' queues through cli, on e, for the shared
// tests.
func queueOn(e *testserver.Etcd, cli *clientv3.Client) sessionlocktest.Queue {
	return sessionlocktest.Queue{
		NewLocker: func(t *testing.T) *dlock.Locker { return newLocker(t, cli, nil) },
		NewLockerRetry: func(t *testing.T, maxRetry time.Duration) *dlock.Locker {
			return newLocker(t, cli, &etcdlock.Options{MaxRetryInterval: maxRetry})
		},
		Entries: func(t *testing.T, name string) int {
			resp, err := cli.Get(t.Context(), etcdlock.Key("", name), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return -1
			}
			return int(resp.Count)
		},
		// A Locker's waiters share one watch per name: count their waits
		// on it too.
		Watches: func(t *testing.T) int { return e.Watchers(t) + int(testhook.Waiting()) },
		Wakeups: testhook.Wakeups,
	}
}

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{"hold": testworker.Hold, "tokenhold": testworker.TokenHold})
	sessionlocktest.Main(m)
}

func TestQueue(t *testing.T) {
	e := testserver.StartEtcd(t)
	sessionlocktest.TestQueue(t, queueOn(e, e.Client(t)))
}

func TestModes(t *testing.T) {
	e := testserver.StartEtcd(t)
	sessionlocktest.TestModes(t, queueOn(e, e.Client(t)))
}
