package zklock_test

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// childCzxid returns the czxid of the only child of name's parent.
func childCzxid(t *testing.T, conn *zk.Conn, name string) uint64 {
	t.Helper()
	parent := zklock.Key("", name)
	kids, _, err := conn.Children(parent)
	if err != nil || len(kids) != 1 {
		t.Fatalf("Children(%s) = %q, %v; want one child", parent, kids, err)
	}
	_, st, err := conn.Get(parent + "/" + kids[0])
	if err != nil {
		t.Fatalf("Get(%s/%s) = %v", parent, kids[0], err)
	}
	return uint64(st.Czxid)
}

// A child created alone holds at once, with the fence the create's
// transaction gave it: its own czxid, in every mode, and tokens increase
// from one holder to the next.
func TestFenceOfLoneChildIsItsCzxid(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	conn := z.Conn(t, sessionTimeout)
	l := newLocker(t, conn)
	var last uint64
	for _, m := range []struct {
		what string
		opts []dlock.Option
	}{
		{"exclusive", nil},
		{"shared", []dlock.Option{dlock.Shared()}},
		{"permit", []dlock.Option{dlock.WithLimit(3)}},
		{"exclusive again", nil},
	} {
		k, err := l.TryAcquire(t.Context(), "lone", m.opts...)
		if err != nil {
			t.Fatalf("TryAcquire(lone) %s = %v", m.what, err)
		}
		if got, want := k.Fence(), childCzxid(t, conn, "lone"); got != want {
			t.Errorf("TryAcquire(lone) %s: Fence() = %d, want the child's czxid %d", m.what, got, want)
		}
		if k.Fence() <= last {
			t.Errorf("TryAcquire(lone) %s: Fence() = %d, want above the previous holder's %d", m.what, k.Fence(), last)
		}
		last = k.Fence()
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(lone) %s = %v", m.what, err)
		}
	}
}

// A lock's parent whose ACL denies WRITE (made by someone else than
// dlock) still works: the child is created alone, and its place read.
func TestParentWithoutWrite(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	conn := z.Conn(t, sessionTimeout)
	for _, p := range []string{zklock.DefaultPrefix, zklock.Key("", "nowrite")} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermCreate|zk.PermRead|zk.PermDelete)); err != nil {
			t.Fatalf("Create(%s) = %v", p, err)
		}
	}
	l := newLocker(t, conn)
	k, err := l.TryAcquire(t.Context(), "nowrite")
	if err != nil {
		t.Fatalf("TryAcquire(nowrite) = %v, want the lock", err)
	}
	if got, want := k.Fence(), childCzxid(t, conn, "nowrite"); got != want {
		t.Errorf("Fence() = %d, want the child's czxid %d", got, want)
	}
	if _, err := newLocker(t, conn).TryAcquire(t.Context(), "nowrite"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("second TryAcquire(nowrite) = %v, want ErrNotAcquired", err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(nowrite) = %v", err)
	}
}
