package zklock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// The adversary is a service that locks a new name per request and never
// uses it again: the server's state must not grow with the number of
// names ever used. After release, a name leaves only its parent znode,
// with no child (no ephemeral node remains), and the server's container
// manager removes that parent, and the prefix's root once it is empty, at
// its next pass (every znode.container.checkIntervalMs, here 250 ms; the
// default is a minute).
func TestWhatStaysPerName(t *testing.T) {
	z := testserver.StartZooKeeper(t, testserver.ContainerCheck(250*time.Millisecond))
	base := z.MntrInt(t, "zk_znode_count")
	conn := z.Conn(t, sessionTimeout)
	ls := []*dlock.Locker{newLocker(t, conn), newLocker(t, z.Conn(t, sessionTimeout))}
	const names = 300
	contend(t, ls, names, 20)
	checkNamesLeft(t, z, conn, names)
	var n int64
	start := time.Now()
	for n = z.MntrInt(t, "zk_znode_count"); n > base && time.Since(start) < 30*time.Second; n = z.MntrInt(t, "zk_znode_count") {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("znodes: %d before, %d after %v", base, n, time.Since(start).Round(time.Millisecond))
	if n != base {
		t.Errorf("MntrInt(zk_znode_count) 30s after %d names were released = %d, want the baseline %d", names, n, base)
	}
}

// checkNamesLeft checks that after the holders of up to names names have
// released them, no ephemeral node remains on z and what remains under
// the prefix's root is at most one parent per name, each without
// children.
func checkNamesLeft(t *testing.T, z *testserver.ZooKeeper, conn *zk.Conn, names int) {
	t.Helper()
	if n := z.MntrInt(t, "zk_ephemerals_count"); n != 0 {
		t.Errorf("MntrInt(zk_ephemerals_count) after every release = %d, want 0", n)
	}
	root := zklock.DefaultPrefix
	parents, _, err := conn.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return // the container manager removed them all already
	}
	if err != nil {
		t.Fatalf("Children(%s) = %v", root, err)
	}
	if len(parents) > names {
		t.Errorf("Children(%s) after %d names were released = %d znodes, want at most one per name", root, names, len(parents))
	}
	for _, p := range parents {
		kids, _, err := conn.Children(root + "/" + p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("Children(%s/%s) = %v", root, p, err)
		}
		if len(kids) != 0 {
			t.Errorf("Children(%s/%s) after release = %q, want none", root, p, kids)
		}
	}
	t.Logf("%d names used: %d parents left under %s", names, len(parents), root)
}

// Each uncontended TryAcquire+Release on a name whose parent exists is
// two transactions (two zxids): the create of the child with the write of
// its parent's data, and the delete of the child. The first use of a
// name adds the creates of its parent (and of the prefix's root) and the
// container manager's delete of the parent later adds one more.
func TestZxidsPerAcquisition(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	l := newLocker(t, z.Conn(t, sessionTimeout))
	cycle := func(name string) {
		t.Helper()
		k, err := l.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
	}
	before := z.Zxid(t)
	cycle("zxid/first")
	first := z.Zxid(t) - before
	before = z.Zxid(t)
	cycle("zxid/second")
	second := z.Zxid(t) - before
	const cycles = 100
	before = z.Zxid(t)
	for range cycles {
		cycle("zxid/first")
	}
	if got := z.Zxid(t) - before; got != 2*cycles {
		t.Errorf("Zxid() after %d TryAcquire+Release = +%d, want +%d", cycles, got, 2*cycles)
	}
	t.Logf("first use of a name: %d zxids (%d for the second name); then 2 per TryAcquire+Release", first, second)
}
