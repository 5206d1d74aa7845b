package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// sessionTimeout is the session timeout of the connections the tests
// share; the test server accepts 1 s to 10 s.
const sessionTimeout = 4 * time.Second

// harness returns a conformance Harness on the server behind conn. Every
// Locker shares conn (and so its session), like the goroutines of one
// service would.
func harness(conn *zk.Conn) dlocktest.Harness {
	return dlocktest.Harness{
		Queued: func(t testing.TB, name string) int { return testhook.Queued(conn, name) },
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := zklock.New(conn, nil)
			if err != nil {
				t.Fatalf("zklock.New = %v", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			l, d, err := testhook.New(conn)
			if err != nil {
				t.Fatalf("testhook.New = %v", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			deleteChildren(t, conn, zklock.Key("", name))
		},
		Ping: func(ctx context.Context) error { _, _, err := conn.Exists("/"); return err },
		TTL:  time.Second,
		// An ephemeral node belongs to its session for life, and the
		// session is its lease: see the package doc's Limits.
		NoResume:    true,
		NoExtend:    true,
		NoLockDelay: true,
	}
}

// deleteChildren deletes every child of parent: the holder and waiters of
// a lock.
func deleteChildren(t testing.TB, conn *zk.Conn, parent string) {
	t.Helper()
	kids, _, err := conn.Children(parent)
	if err != nil {
		t.Fatalf("Children(%s) = %v", parent, err)
	}
	if len(kids) == 0 {
		t.Fatalf("Children(%s) is empty, want the holder's child", parent)
	}
	for _, k := range kids {
		if err := conn.Delete(parent+"/"+k, -1); err != nil {
			t.Fatalf("Delete(%s/%s) = %v", parent, k, err)
		}
	}
}

func TestConformance(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	dlocktest.Run(t, harness(z.Conn(t, sessionTimeout)))
}

func BenchmarkZooKeeper(b *testing.B) {
	z := testserver.StartZooKeeper(b)
	dlocktest.RunBenchmarks(b, harness(z.Conn(b, sessionTimeout)))
}

func TestKey(t *testing.T) {
	for _, c := range []struct{ prefix, name, want string }{
		{"", "a", "/dlock/a"},
		{"/x/", "a/b", "/x/a%2Fb"},
		{"x", "{ü} .", "/x/%7B%C3%BC%7D%20%2E"},
		{"/", "..", "/%2E%2E"},
	} {
		if got := zklock.Key(c.prefix, c.name); got != c.want {
			t.Errorf("Key(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
}

// Fencing tokens of shared holds keep increasing when the lock's parent
// znode is removed while the name is free (the server removes empty
// containers, and the sequence numbers of a re-created parent start at 0
// again): a token is its child's czxid, not its sequence number.
func TestFenceAcrossParentRemoval(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	conn := z.Conn(t, sessionTimeout)
	name := "recreated/" + t.Name()
	a, b := newLocker(t, conn), newLocker(t, conn)
	var last uint64
	take := func(l *dlock.Locker, what string, opts ...dlock.Option) *dlock.Lock {
		t.Helper()
		k, err := l.TryAcquire(t.Context(), name, opts...)
		if err != nil {
			t.Fatalf("TryAcquire(%q) %s = %v", name, what, err)
		}
		if k.Fence() <= last {
			t.Errorf("%s has fence %d, want above every earlier token (%d)", what, k.Fence(), last)
		}
		last = k.Fence()
		return k
	}
	release := func(k *dlock.Lock) {
		t.Helper()
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
	}
	for range 3 {
		r1 := take(a, "a shared hold", dlock.Shared())
		r2 := take(b, "a second shared hold", dlock.Shared())
		release(r1)
		release(r2)
		release(take(a, "a writer after readers"))
		// The server may have removed the empty container already.
		if err := conn.Delete(zklock.Key("", name), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("Delete(%s) of the free lock's parent = %v", zklock.Key("", name), err)
		}
	}
}
