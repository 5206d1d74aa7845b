package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// compactRevision returns the revision the store's history was last
// compacted to (0 if never), from the reply of a watch from revision 1.
func compactRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	for resp := range cli.Watch(ctx, "compact-probe", clientv3.WithRev(1)) {
		return resp.CompactRevision
	}
	return 0 // no compaction: the watch from revision 1 just waits
}

// churn acquires and releases n names through l, one after the other.
func churn(t *testing.T, l *dlock.Locker, n int) {
	t.Helper()
	for i := range n {
		testkit.MustRelease(t, testkit.MustAcquire(t, l, fmt.Sprintf("churn/%d", i%50)))
	}
}

// waitCompacted waits, for up to a minute, until the store's history is
// compacted to rev or later, and returns the compact revision.
func waitCompacted(t *testing.T, cli *clientv3.Client, rev int64) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c := compactRevision(t, cli)
		if c >= rev {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute the history is compacted to %d, want %d or later", c, rev)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The adversary is history that grows without end under lock load, while
// another user of the cluster watches its own keys. With compact_every
// on two Lockers, the history below the revision read one period earlier
// is compacted (a read there fails with ErrCompacted), the other user's
// watch that was running from a recent revision sees every event, before
// and after, and only a watch that starts below the compaction fails.
func TestCompactEvery(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	start := revision(t, cli)
	wctx, stop := context.WithCancel(t.Context())
	defer stop()
	watch := cli.Watch(wctx, "other/", clientv3.WithPrefix(), clientv3.WithRev(start+1), clientv3.WithCreatedNotify())
	if resp := <-watch; !resp.Created {
		t.Fatalf("watch(other/) first reply = %v, want its creation", resp.Err())
	}
	var lockers []*dlock.Locker
	for range 2 {
		l, err := dlock.Open(t.Context(), "etcd://"+e.Addr()+"?compact_every=200ms")
		if err != nil {
			t.Fatalf("Open(compact_every=200ms) = %v", err)
		}
		t.Cleanup(func() { l.Close() })
		lockers = append(lockers, l)
	}
	const puts = 5
	for i := range puts {
		if _, err := cli.Put(t.Context(), "other/k", fmt.Sprint(i)); err != nil {
			t.Fatalf("Put(other/k) = %v", err)
		}
		churn(t, lockers[i%2], 100)
	}
	end := revision(t, cli)
	c := waitCompacted(t, cli, end)
	t.Logf("revisions %d..%d made, history compacted to %d", start, end, c)
	if _, err := cli.Get(t.Context(), "other/k", clientv3.WithRev(end-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("Get(other/k, rev %d) after compaction to %d = %v, want ErrCompacted", end-1, c, err)
	}
	if _, err := cli.Put(t.Context(), "other/k", "after"); err != nil {
		t.Fatalf("Put(other/k) = %v", err)
	}
	for i := range puts + 1 {
		resp, ok := <-watch
		if !ok || resp.Err() != nil || len(resp.Events) != 1 {
			t.Fatalf("running watch, reply %d = %v, %v (%d events), want one event", i, resp.Err(), ok, len(resp.Events))
		}
	}
	late := cli.Watch(wctx, "other/", clientv3.WithPrefix(), clientv3.WithRev(start+1))
	if resp := <-late; !errors.Is(resp.Err(), rpctypes.ErrCompacted) {
		t.Errorf("watch from %d after compaction to %d = %v, want ErrCompacted", start+1, c, resp.Err())
	}
}

// The adversary is the same history growth with no Locker compacting:
// the recommended server flag, --auto-compaction-mode=periodic with a
// retention, keeps the history bounded by itself (here 2 s, so the test
// sees it: a deployment keeps minutes or hours).
func TestServerAutoCompaction(t *testing.T) {
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{Args: []string{
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=2s"}})
	cli := e.Client(t)
	l := newLocker(t, cli, nil)
	churn(t, l, 300)
	end := revision(t, cli)
	c := waitCompacted(t, cli, end-100)
	t.Logf("revisions up to %d made, history compacted to %d by the server", end, c)
}

// The adversary is a least-privileged Locker (readwrite on its prefix
// only, as the package doc recommends): compact_every must still compact,
// or the history it was asked to bound grows silently.
func TestCompactEveryLeastPrivilege(t *testing.T) {
	e, p, root := secureEtcd(t)
	u := userURL(e, p, "locker", lockerPassword)
	u = strings.Replace(u, "?", "?compact_every=200ms&", 1)
	l := testkit.MustOpen(t, u)
	churn(t, l, 50)
	end := revision(t, root)
	t.Logf("history compacted to %d", waitCompacted(t, root, end))
}
