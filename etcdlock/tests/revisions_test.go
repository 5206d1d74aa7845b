package etcdlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testkit"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// revision returns the store's current revision, read through cli (a
// read makes none).
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), "revision-probe")
	if err != nil {
		t.Fatalf("Get(revision-probe) = %v", err)
	}
	return resp.Header.Revision
}

// revisionsOf returns how many revisions f made on the store.
func revisionsOf(t *testing.T, cli *clientv3.Client, f func(t *testing.T)) int64 {
	t.Helper()
	before := revision(t, cli)
	f(t)
	return revision(t, cli) - before
}

// The adversary is history growth: etcd keeps every revision until it is
// compacted, so each write an acquisition makes is history an operator
// must compact (see the package doc). An acquisition of any mode, queued
// or not, makes two revisions, the floor for a queue of keys (the put
// that joins, the delete that leaves); a failed TryAcquire or a wait
// given up makes the same two; renewals (reads and lease keep-alives)
// and the Close of an idle Locker make none; Close deletes what it holds,
// one revision a lock.
func TestRevisionsPerAcquire(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	l := newLocker(t, cli, &etcdlock.Options{SessionTTL: 4 * time.Second})
	other := newLocker(t, cli, nil)
	for _, lk := range []*dlock.Locker{l, other} { // grant the sessions
		testkit.MustRelease(t, testkit.MustAcquire(t, lk, "warm-up"))
	}
	var renewed *dlock.Lock
	for _, c := range []struct {
		what   string
		want   int64
		before func(t *testing.T) // unmeasured
		f      func(t *testing.T)
	}{
		{"exclusive acquire+release", 2, nil, func(t *testing.T) { testkit.MustRelease(t, testkit.MustAcquire(t, l, "x")) }},
		{"shared acquire+release", 2, nil, func(t *testing.T) { testkit.MustRelease(t, testkit.MustAcquire(t, l, "s", dlock.Shared())) }},
		{"permit acquire+release", 2, nil, func(t *testing.T) { testkit.MustRelease(t, testkit.MustAcquire(t, l, "p", dlock.WithLimit(3))) }},
		{"two acquisitions, the second queued behind the first", 4, nil, func(t *testing.T) { contended(t, cli, l, other) }},
		{"failed TryAcquire", 2,
			func(t *testing.T) {
				k := testkit.MustAcquire(t, other, "busy")
				t.Cleanup(func() { k.Release(context.Background()) })
			},
			func(t *testing.T) { failedTry(t, l, other) }},
		{"renewals of a held lock", 0,
			func(t *testing.T) { renewed = testkit.MustAcquire(t, l, "r", dlock.WithTTL(time.Second)) },
			func(t *testing.T) { renewals(t, cli, renewed) }},
		{"release of the renewed lock", 1, nil, func(t *testing.T) { testkit.MustRelease(t, renewed) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			if c.before != nil {
				c.before(t)
			}
			if got := revisionsOf(t, cli, c.f); got != c.want {
				t.Errorf("%s made %d revisions, want %d", c.what, got, c.want)
			}
		})
	}
	idle := newLocker(t, cli, nil)
	testkit.MustRelease(t, testkit.MustAcquire(t, idle, "warm-up"))
	if got := revisionsOf(t, cli, func(t *testing.T) { idle.Close() }); got != 0 {
		t.Errorf("Close of an idle Locker made %d revisions, want 0", got)
	}
	busy := newLocker(t, cli, nil)
	for _, name := range []string{"a", "b", "c"} {
		testkit.MustAcquire(t, busy, name)
	}
	// Close releases each lock (a delete each), then revokes the session
	// with nothing left on it.
	if got := revisionsOf(t, cli, func(t *testing.T) { busy.Close() }); got != 3 {
		t.Errorf("Close of a Locker holding 3 locks made %d revisions, want 3", got)
	}
}

// contended has a take "c", b queue for it, then a and b release it.
func contended(t *testing.T, cli *clientv3.Client, a, b *dlock.Locker) {
	t.Helper()
	k := testkit.MustAcquire(t, a, "c")
	got := make(chan *dlock.Lock, 1)
	go func() {
		k, err := b.Acquire(t.Context(), "c")
		if err != nil {
			t.Errorf("queued Acquire(c) = %v", err)
		}
		got <- k
	}()
	sessionlocktest.WaitEntries(t, queueOn(nil, cli), "c", 2)
	testkit.MustRelease(t, k)
	if k := <-got; k != nil {
		testkit.MustRelease(t, k)
	}
}

// failedTry has a TryAcquire "busy", which b holds, and fail.
func failedTry(t *testing.T, a, b *dlock.Locker) {
	t.Helper()
	if _, err := a.TryAcquire(t.Context(), "busy"); err == nil {
		t.Fatalf("TryAcquire(busy) = nil, want ErrNotAcquired")
	}
}

// renewals keeps k (held with a short TTL, renewed by dlock) through at
// least two keep-alives of its session lease (seen by the lease's
// remaining TTL going up) and explicit refreshes.
func renewals(t *testing.T, cli *clientv3.Client, k *dlock.Lock) {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdlock.Key("", k.Name()), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(r's keys) = %v, %v; want one key", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	ttl := func() int64 {
		r, err := cli.TimeToLive(t.Context(), lease)
		if err != nil {
			t.Fatalf("TimeToLive(%x) = %v", lease, err)
		}
		return r.TTL
	}
	deadline := time.Now().Add(30 * time.Second)
	for seen, last := 0, ttl(); seen < 2; {
		if err := k.Refresh(t.Context()); err != nil {
			t.Fatalf("Refresh(r) = %v", err)
		}
		if now := ttl(); now > last {
			seen++ // seconds only: a keep-alive shows as a rise
			last = now
		} else {
			last = now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session lease was not kept alive twice in 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkHistory measures what acquisitions leave in etcd's history,
// per acquisition: revisions, and growth of the database file (DbSize)
// and of its part in use (DbSizeInUse), without compaction, with a
// Locker's CompactEvery, and with the server's periodic compaction. Run with -benchtime=10000x for the figures per
// 10,000 acquisitions the package doc quotes.
func BenchmarkHistory(b *testing.B) {
	for _, c := range []struct {
		name  string
		every time.Duration
		args  []string
	}{
		{"none", 0, nil},
		{"compact_every=1s", time.Second, nil},
		{"server-periodic-1s", 0, []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1s"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := testserver.StartEtcdWith(b, testserver.EtcdOptions{Args: c.args})
			cli := e.Client(b)
			l := newLocker(b, cli, &etcdlock.Options{CompactEvery: c.every})
			status := func() *clientv3.StatusResponse {
				s, err := cli.Status(b.Context(), e.Addr())
				if err != nil {
					b.Fatalf("Status = %v", err)
				}
				return s
			}
			before := status()
			i := 0
			for b.Loop() {
				k, err := l.Acquire(b.Context(), fmt.Sprintf("h/%d", i%1000))
				if err != nil {
					b.Fatalf("Acquire = %v", err)
				}
				if err := k.Release(b.Context()); err != nil {
					b.Fatalf("Release = %v", err)
				}
				i++
			}
			after := status()
			n := float64(b.N)
			b.ReportMetric(float64(after.Header.Revision-before.Header.Revision)/n, "revisions/op")
			b.ReportMetric(float64(after.DbSize-before.DbSize)/n, "db-bytes/op")
			b.ReportMetric(float64(after.DbSizeInUse-before.DbSizeInUse)/n, "db-in-use-bytes/op")
			b.ReportMetric(float64(after.DbSize), "db-bytes")
		})
	}
}
