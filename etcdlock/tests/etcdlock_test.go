package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/testserver"
)

// newLocker returns a Locker on cli, closed at the end of the test.
func newLocker(t testing.TB, cli *clientv3.Client, opts *etcdlock.Options) *dlock.Locker {
	t.Helper()
	l, err := etcdlock.New(cli, opts)
	if err != nil {
		t.Fatalf("etcdlock.New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// harness returns a conformance Harness on the server behind cli. Every
// Locker shares cli, like the goroutines of one service would.
func harness(cli *clientv3.Client) dlocktest.Harness {
	return dlocktest.Harness{
		Queued: func(t testing.TB, name string) int { return testhook.Queued(t.Context(), cli, name) },
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := etcdlock.New(cli, nil)
			if err != nil {
				t.Fatalf("etcdlock.New = %v", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			l, d, err := testhook.New(cli)
			if err != nil {
				t.Fatalf("testhook.New = %v", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			resp, err := cli.Delete(t.Context(), etcdlock.Key("", name), clientv3.WithPrefix())
			if err != nil || resp.Deleted == 0 {
				t.Fatalf("Delete(%q, prefix) = %v, %v; want the holder's key deleted", etcdlock.Key("", name), resp, err)
			}
		},
		Ping: func(ctx context.Context) error { _, err := cli.Get(ctx, "dlock-ping"); return err },
		TTL:  time.Second,
	}
}

func TestConformance(t *testing.T) {
	e := testserver.StartEtcd(t)
	dlocktest.Run(t, harness(e.Client(t)))
}

func BenchmarkEtcd(b *testing.B) {
	e := testserver.StartEtcd(b)
	dlocktest.RunBenchmarks(b, harness(e.Client(b)))
}

func TestKey(t *testing.T) {
	for _, c := range []struct{ prefix, name, want string }{
		{"", "a", "dlock/a/"},
		{"p:", "a/b%c", "p:a%2Fb%25c/"},
		{"", "{ü} .", "dlock/{ü} ./"},
	} {
		if got := etcdlock.Key(c.prefix, c.name); got != c.want {
			t.Errorf("Key(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
}
