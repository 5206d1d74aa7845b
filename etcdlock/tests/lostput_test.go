package etcdlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The adversary is a put whose reply is lost, and replies that stay lost
// until the waiter has given up and the releases run for it have failed
// (the test proxy drops everything etcd sends): etcd attached the
// waiter's key to the Locker's session, the client never learned its
// revision. The connection then comes back within the session's TTL; the
// session, which the driver keeps alive while a key is attached to it,
// would keep the key, and with it every later waiter of the name, for
// good, unless the driver goes on looking for the key once etcd answers.
func TestLostPutLeavesNothing(t *testing.T) {
	e := testserver.StartEtcd(t)
	direct := e.Client(t)
	proxy := testserver.StartProxy(t, e.Addr())
	cli := clientVia(t, proxy)
	holder, waiter, next := newLocker(t, direct, nil), newLocker(t, cli, nil), newLocker(t, direct, nil)
	// A TTL that outlives the outage below (about 11 s), so that the
	// waiter's session lives on through it.
	ttl := dlock.WithTTL(30 * time.Second)
	name := "lost-put"
	// The waiter's session exists before replies are lost.
	testkit.MustRelease(t, testkit.MustTryAcquire(t, waiter, name+"/warm", ttl))
	k := testkit.MustTryAcquire(t, holder, name, ttl)

	var (
		mu     sync.Mutex
		failed int
	)
	hook := func(err error) {
		if err != nil {
			mu.Lock()
			failed++
			mu.Unlock()
		}
	}
	testhook.UnheldRelease.Store(&hook)
	t.Cleanup(func() { testhook.UnheldRelease.Store(nil) })
	failures := func() int { mu.Lock(); defer mu.Unlock(); return failed }

	proxy.DropReplies(t)
	ctx, cancel := context.WithCancel(t.Context())
	got := testkit.AcquireAsync(ctx, waiter, name, ttl)
	keys := func() int64 {
		resp, err := direct.Get(t.Context(), etcdlock.Key("", name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("Get(%q, prefix) = %v", etcdlock.Key("", name), err)
		}
		return resp.Count
	}
	testkit.Eventually(t, "the waiter's key on the server", func() bool { return keys() == 2 })
	cancel()
	testkit.WantError(t, got, name, context.Canceled, testkit.Patience)
	// Two releases run for the given-up wait: one when the caller gives
	// up, one when the put, bounded by its own timeout, returns. Replies
	// come back once both have failed, or after 15 s; a release that
	// ran after that could only make the test pass without the fix,
	// never fail with it.
	for deadline := time.Now().Add(15 * time.Second); failures() < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if failures() == 0 {
		t.Fatalf("no release of the given-up wait failed while replies were lost")
	}
	proxy.Heal(t)

	testkit.MustRelease(t, k)
	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	k2, err := next.Acquire(actx, name, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q) after the holder released = %v, with %d keys under the name (the lost put's key is still queued)", name, err, keys())
	}
	testkit.MustRelease(t, k2)
	if n := keys(); n != 0 {
		t.Errorf("keys under %q after every lock was released = %d, want 0", name, n)
	}
}
