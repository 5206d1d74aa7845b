package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// The lock user of the auth tests, and its least-privilege ACL on the
// prefix's root: CREATE to make each name's parent, READ to list them.
const (
	user     = "alice"
	password = "s3cret-pw"
)

var leastPrivilege = zk.DigestACL(zk.PermCreate|zk.PermRead, user, password)

// authConn returns a connection to z authenticated as user:pass with the
// digest scheme ("" for none).
func authConn(t *testing.T, z *testserver.ZooKeeper, userPass string) *zk.Conn {
	t.Helper()
	conn := z.Conn(t, sessionTimeout)
	if userPass != "" {
		if err := conn.AddAuth("digest", []byte(userPass)); err != nil {
			t.Fatalf("AddAuth(digest, %s) = %v", strings.SplitN(userPass, ":", 2)[0], err)
		}
	}
	return conn
}

// makeRoot creates the prefix's root, as an administrator would, with acl.
func makeRoot(t *testing.T, conn *zk.Conn, acl []zk.ACL) {
	t.Helper()
	if _, err := conn.Create(zklock.DefaultPrefix, nil, 0, acl); err != nil {
		t.Fatalf("Create(%s) = %v", zklock.DefaultPrefix, err)
	}
}

// The conformance suite passes through zk://user:password@host URLs with
// nothing more than the least-privilege ACL on the prefix's root.
func TestConformanceDigest(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	makeRoot(t, z.Conn(t, sessionTimeout), leastPrivilege)
	owner := authConn(t, z, user+":"+password)
	url := "zk://" + user + ":" + password + "@" + z.Addr()
	h := harness(owner)
	h.NewLocker = func(t testing.TB) *dlock.Locker { return testkit.MustOpen(t, url) }
	dlocktest.Run(t, h)
}

// Neither another digest identity (nor the owner's user with a wrong
// password) nor an unauthenticated client can delete or overwrite a lock's
// znodes, nor join its queue; the owner's Release works.
func TestNeighbourCannotFreeLock(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	l := testkit.MustOpen(t, "zk://"+user+":"+password+"@"+z.Addr())
	defer l.Close()
	k, err := l.TryAcquire(t.Context(), "n", dlock.WithMetadata("m"))
	if err != nil {
		t.Fatalf("TryAcquire(n) = %v", err)
	}
	parent := zklock.Key("", "n")
	reader := authConn(t, z, "")
	kids, _, err := reader.Children(parent)
	if err != nil || len(kids) != 1 {
		t.Fatalf("Children(%s) = %q, %v; want the holder's child, readable by anyone", parent, kids, err)
	}
	child := parent + "/" + kids[0]
	if data, _, err := reader.Get(child); err != nil || string(data) != "m" {
		t.Errorf("Get(%s) by anyone = %q, %v; want the metadata", child, data, err)
	}
	for _, who := range []string{"bob:pw", user + ":wrong", ""} {
		conn := authConn(t, z, who)
		if err := conn.Delete(child, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Delete(child) as %q = %v, want ErrNoAuth", who, err)
		}
		if _, err := conn.Set(child, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Set(child) as %q = %v, want ErrNoAuth", who, err)
		}
		if _, err := conn.Set(parent, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Set(parent) as %q = %v, want ErrNoAuth", who, err)
		}
		if _, err := conn.Create(parent+"/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Create(parent/x) as %q = %v, want ErrNoAuth", who, err)
		}
		if _, err := newLocker(t, conn).TryAcquire(t.Context(), "n"); !errors.Is(err, zk.ErrNoAuth) || !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("TryAcquire(n) as %q = %v, want ErrNoAuth and dlock.ErrDenied", who, err)
		}
	}
	if ok, _, err := reader.Exists(child); !ok || err != nil {
		t.Fatalf("Exists(child) after the neighbours = %v, %v; want the child in place", ok, err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(n) = %v, want nil", err)
	}
	if ok, _, err := reader.Exists(child); ok || err != nil {
		t.Errorf("Exists(child) after Release = %v, %v; want gone", ok, err)
	}
}

// A user whose identity lacks CREATE on the prefix's root gets an error
// wrapping zk.ErrNoAuth that says what is missing, at once: not a hang,
// even from a waiting Acquire.
func TestPrefixWithoutCreate(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	makeRoot(t, z.Conn(t, sessionTimeout), zk.DigestACL(zk.PermRead, user, password))
	l := testkit.MustOpen(t, "zk://"+user+":"+password+"@"+z.Addr())
	defer l.Close()
	if _, err := l.TryAcquire(t.Context(), "n"); !errors.Is(err, zk.ErrNoAuth) || !errors.Is(err, dlock.ErrDenied) || !strings.Contains(err.Error(), "needs CREATE on /dlock") {
		t.Errorf("TryAcquire(n) = %v, want ErrNoAuth and dlock.ErrDenied saying it needs CREATE on /dlock", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := l.Acquire(ctx, "n"); !errors.Is(err, dlock.ErrDenied) || ctx.Err() != nil {
		t.Errorf("Acquire(n) = %v (context: %v), want ErrNoAuth before the context ends", err, ctx.Err())
	}
}

// The credentials hold across a new connection: after the server
// restarts, the Locker still creates znodes under a root only its
// identity may create in.
func TestDigestAuthAfterReconnect(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	makeRoot(t, z.Conn(t, sessionTimeout), leastPrivilege)
	l := testkit.MustOpen(t, "zk://"+user+":"+password+"@"+z.Addr()+"?session_timeout=4s")
	defer l.Close()
	testkit.Cycle(t, l, "before")
	z.Restart(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	k, err := l.Acquire(ctx, "after")
	if err != nil {
		t.Fatalf("Acquire(after) after a restart = %v, want the lock", err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(after) = %v", err)
	}
}

// Under the least-privilege ACL the server still removes a name's empty
// parent: the writes dlock makes to it keep it a container.
func TestParentRemovedWhenEmpty(t *testing.T) {
	z := testserver.StartZooKeeper(t, testserver.ContainerCheck(100*time.Millisecond))
	reader := z.Conn(t, sessionTimeout)
	makeRoot(t, reader, leastPrivilege)
	l := testkit.MustOpen(t, "zk://"+user+":"+password+"@"+z.Addr())
	defer l.Close()
	testkit.Cycle(t, l, "c")
	testkit.Cycle(t, l, "c", dlock.Shared())
	parent := zklock.Key("", "c")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, _, err := reader.Exists(parent)
		if err != nil {
			t.Fatalf("Exists(%s) = %v", parent, err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Exists(%s) = true 30 s after the last release, want the server to remove the empty container", parent)
		}
	}
	if ok, _, err := reader.Exists(zklock.DefaultPrefix); !ok || err != nil {
		t.Errorf("Exists(%s) = %v, %v; want the administrator's root kept", zklock.DefaultPrefix, ok, err)
	}
}

// The least-privilege ACL on the prefix's root is enough even when the
// znodes above it grant the lock user nothing.
func TestPrefixUnderClosedZnode(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	admin := authConn(t, z, "admin:adminpw")
	if _, err := admin.Create("/apps", nil, 0, zk.DigestACL(zk.PermAll, "admin", "adminpw")); err != nil {
		t.Fatalf("Create(/apps) = %v", err)
	}
	if _, err := admin.Create("/apps/locks", nil, 0, leastPrivilege); err != nil {
		t.Fatalf("Create(/apps/locks) = %v", err)
	}
	l := testkit.MustOpen(t, "zk://"+user+":"+password+"@"+z.Addr()+"/apps/locks")
	defer l.Close()
	testkit.Cycle(t, l, "n")
}
