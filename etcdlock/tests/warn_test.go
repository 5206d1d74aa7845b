package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// clientVia returns a client of the etcd server behind proxy, closed at
// the end of the test.
func clientVia(t *testing.T, proxy *testserver.Proxy) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// A partition between the holder and etcd (the adversary: a network that
// drops everything, through the test proxy): the lock's Warnings yields a
// value with an error before its Done closes.
func TestWarningBeforeLoss(t *testing.T) {
	e := testserver.StartEtcd(t)
	proxy := testserver.StartProxy(t, e.Addr())
	cli := clientVia(t, proxy)
	l := newLocker(t, cli, nil)
	const ttl = 3 * time.Second
	k, err := l.TryAcquire(t.Context(), "warn/"+t.Name(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	ws := k.Warnings()
	proxy.Partition(t)
	cut := time.Now()
	warned, done := testkit.WarnedBeforeDone(t, k, ws, 2*ttl)
	t.Logf("TTL %v: warning %v after the partition, Done %v after it: the warning came %v before Done",
		ttl, warned.Sub(cut), done.Sub(cut), done.Sub(warned))
	proxy.Heal(t)
}
