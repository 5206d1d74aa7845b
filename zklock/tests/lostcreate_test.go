package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// The adversary is a create whose reply is lost, followed by an outage
// that outlasts the waiter: the server made the waiter's child, the
// client never learned its path, the waiter gave up, and the release
// that cleans up after it failed too, as the server was still out of
// reach. The connection then comes back within its session, and a
// session keeps its ephemeral children for as long as it lives: unless
// the driver goes on looking for the child once the server is back, it
// stays in the name's queue for the Locker's lifetime, and every later
// waiter of the name waits behind it for ever (a full run of the suite
// hung 19 minutes on such a child in TestReconnectPace).
func TestLostCreateLeavesNothing(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	const session = 10 * time.Second // the test server's longest
	direct := z.Conn(t, session)
	f := &freezer{}
	proxied := connect(t, z.Addr(), session, f)
	holder, waiter, next := newLocker(t, direct), newLocker(t, proxied), newLocker(t, direct)
	name := "lost-create"
	parent := zklock.Key("", name)
	k := testkit.MustTryAcquire(t, holder, name)

	failed := make(chan struct{})
	var once sync.Once
	hook := func(unsure bool, err error) {
		if unsure && err != nil {
			once.Do(func() { close(failed) })
		}
	}
	testhook.UnheldRelease.Store(&hook)
	t.Cleanup(func() { testhook.UnheldRelease.Store(nil) })
	f.mu.Lock()
	lost := make(chan struct{})
	f.loseMulti = lost
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	got := testkit.AcquireAsync(ctx, waiter, name)
	select {
	case <-lost:
	case r := <-got:
		t.Fatalf("Acquire(%q) = %v before its create was sent", name, r.Err)
	case <-time.After(testkit.Patience):
		t.Fatalf("the waiter sent no create within %v", testkit.Patience)
	}
	// The server ran the create: the queue has the waiter's child too.
	testkit.Eventually(t, "the lost create's child on the server", func() bool {
		kids, _, err := direct.Children(parent)
		return err == nil && len(kids) == 2
	})
	sessionID := proxied.SessionID()
	f.cut() // the server out of reach: dials fail until restore
	cancel()
	testkit.WantError(t, got, name, context.Canceled, testkit.Patience)
	// Restore only once the release run for the given-up wait, with the
	// create's outcome unknown, has failed.
	select {
	case <-failed:
	case <-time.After(testkit.Patience):
		t.Fatalf("no release of the given-up wait failed with its create unsure within %v", testkit.Patience)
	}
	f.set(false)
	f.restore()
	testkit.Eventually(t, "the proxied connection's session back", func() bool {
		return proxied.SessionID() == sessionID && proxied.State() == zk.StateHasSession
	})

	testkit.MustRelease(t, k)
	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	k2, err := next.Acquire(actx, name)
	if err != nil {
		kids, _, _ := direct.Children(parent)
		t.Fatalf("Acquire(%q) after the holder released = %v; children of %s: %v (the lost create's child is still queued)", name, err, parent, kids)
	}
	testkit.MustRelease(t, k2)
	if kids, _, err := direct.Children(parent); err != nil || len(kids) != 0 {
		t.Errorf("children of %s after every lock was released = %v, %v, want none", parent, kids, err)
	}
}
