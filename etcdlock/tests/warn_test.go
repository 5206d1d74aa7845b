package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// A partition between the holder and etcd (the adversary: a network that
// drops everything, through the test proxy): the lock's Warnings yields a
// value with an error before its Done closes.
func TestWarningBeforeLoss(t *testing.T) {
	e := testserver.StartEtcd(t)
	proxy := testserver.StartProxy(t, e.Addr())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	l := newLocker(t, cli, nil)
	const ttl = 3 * time.Second
	k, err := l.TryAcquire(t.Context(), "warn/"+t.Name(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	ws := k.Warnings()
	proxy.Partition(t)
	cut := time.Now()
	warned := waitWarning(t, k, ws, 2*ttl)
	select {
	case <-k.Done():
	case <-time.After(2 * ttl):
		t.Fatalf("Done still open %v after the partition", 2*ttl)
	}
	done := time.Now()
	t.Logf("TTL %v: warning %v after the partition, Done %v after it: the warning came %v before Done",
		ttl, warned.Sub(cut), done.Sub(cut), done.Sub(warned))
	proxy.Heal(t)
}

// waitWarning waits up to limit for a warning with an error on ws, which
// must come while k's Done is still open, and returns when it came.
func waitWarning(t *testing.T, k *dlock.Lock, ws <-chan dlock.Warning, limit time.Duration) time.Time {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case w, ok := <-ws:
			at := time.Now()
			switch {
			case !ok:
				t.Fatalf("Warnings closed (Done closed) before any warning with an error")
			case w.Err == nil:
				continue
			}
			select {
			case <-k.Done():
				t.Fatalf("the warning %v came after Done closed", w.Err)
			default:
			}
			return at
		case <-timeout:
			t.Fatalf("no warning %v after the partition", limit)
		}
	}
}
