package zklock_test

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// The adversary is a server that refuses creates for lack of room: a
// hard quota on the number of znodes under the prefix's root (ZooKeeper's
// setquota -N, enforced with zookeeper.enforceQuota). An acquisition that
// needs one more znode must fail with an error wrapping dlock.ErrNoSpace,
// at once, not as an unknown error; a release still frees its name.
func TestQuotaIsNoSpace(t *testing.T) {
	z := testserver.StartZooKeeper(t, testserver.EnforceQuota())
	conn := z.Conn(t, sessionTimeout)
	l := newLocker(t, conn)
	// The root, one name's parent and its holder's child.
	k, err := l.TryAcquire(t.Context(), "quota/held")
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v", "quota/held", err)
	}
	testserver.SetCountQuota(t, conn, zklock.DefaultPrefix, 3)
	for _, name := range []string{"quota/held", "quota/new"} {
		_, err := l.Acquire(t.Context(), name)
		t.Logf("Acquire(%q) over the quota = %v", name, err)
		if !errors.Is(err, dlock.ErrNoSpace) {
			t.Errorf("Acquire(%q) over the quota = %v, want ErrNoSpace", name, err)
		}
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) over the quota = %v", "quota/held", err)
	}
	k, err = l.TryAcquire(t.Context(), "quota/held")
	if err != nil {
		t.Fatalf("TryAcquire(%q) after a release = %v", "quota/held", err)
	}
	t.Logf("after the release, the name is taken again: token %d", k.Fence())
}
