package redislock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// newWaitLocker returns a Locker on client that waits for replicas
// acknowledgements, closed when the test ends.
func newWaitLocker(t *testing.T, client redis.UniversalClient, replicas int, timeout time.Duration) *dlock.Locker {
	t.Helper()
	l, err := redislock.New(client, &redislock.Options{WaitReplicas: replicas, WaitTimeout: timeout})
	if err != nil {
		t.Fatalf("redislock.New(WaitReplicas %d) = %v, want a Locker", replicas, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// wantFree fails the test unless name is free on the server behind
// client: no key, or the tombstone of a released lock.
func wantFree(t *testing.T, client *redis.Client, name string) {
	t.Helper()
	v, err := client.Get(t.Context(), redislock.Key("", name)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s: %v", redislock.Key("", name), err)
	}
	if err == nil && !strings.HasPrefix(v, "|") {
		t.Errorf("Got(%q) = %q, want no key or a tombstone: the failed acquisition left its lock behind", redislock.Key("", name), v)
	}
}

// TestWaitReplicasAcrossFailover holds a lock taken with WaitReplicas 1
// through a forced Sentinel failover: another Locker cannot take it, and
// its holder keeps renewing it on the new master (WAIT on the promoted
// replica included).
//
// Replication on loopback is fast, so this would pass without WAIT too:
// it checks that WaitReplicas works across a failover, not that it is
// needed; the test that needs WAIT is TestWaitReplicasPausedReplica.
func TestWaitReplicasAcrossFailover(t *testing.T) {
	s := testserver.StartRedisSentinelReplicated(t)
	a := newWaitLocker(t, s.Client(t), 1, 2*time.Second)
	b := newWaitLocker(t, s.Client(t), 0, 0)
	const name = "failover-wait"
	ttl := 20 * time.Second
	k, err := a.Acquire(t.Context(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
	}
	s.Failover(t)
	if _, err := b.TryAcquire(t.Context(), name, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) on the new master = %v, want ErrNotAcquired", name, err)
	}
	// Sentinel turns the old master into the new master's replica in its
	// own time (more than 10 s here): do it now. Until it syncs, a
	// refresh cannot be acknowledged, but never finds the lock gone.
	host, port, _ := net.SplitHostPort(s.Replica.Addr())
	if err := s.Master.Client(t).ReplicaOf(t.Context(), host, port).Err(); err != nil {
		t.Fatalf("REPLICAOF %s on the old master: %v", s.Replica.Addr(), err)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := k.Refresh(t.Context())
		if err == nil {
			t.Logf("Refresh acknowledged %v after the failover", time.Since(start))
			break
		}
		if errors.Is(err, dlock.ErrNotHeld) || time.Since(start) > ttl/2 {
			t.Fatalf("Refresh(%q) after the failover = %v, want it held and acknowledged", name, err)
		}
	}
	if testkit.IsClosed(k.Done()) {
		t.Fatalf("Done(%q) closed after the failover: %v", name, context.Cause(k.Context()))
	}
	if _, err := b.TryAcquire(t.Context(), name, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) after the refresh = %v, want ErrNotAcquired", name, err)
	}
	testkit.MustRelease(t, k)
}

// TestWaitReplicasPausedReplica pauses the only replica (SIGSTOP), so it
// cannot acknowledge anything: with WaitReplicas 1 both TryAcquire and
// Acquire fail with ErrNotReplicated (not ErrNotAcquired) and leave no
// lock behind, while a Locker without WaitReplicas takes the lock (the
// write a failover to that replica would lose).
func TestWaitReplicasPausedReplica(t *testing.T) {
	s := testserver.StartRedisSentinelReplicated(t)
	master := s.Master.Client(t)
	s.Replica.Pause(t)
	t.Cleanup(func() { s.Replica.Resume(t) })

	a, err := redislock.New(s.Client(t), &redislock.Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const name = "paused"
	_, err = a.TryAcquire(t.Context(), name)
	if !errors.Is(err, redislock.ErrNotReplicated) || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryAcquire(%q) = %v, want ErrNotReplicated", name, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = a.Acquire(ctx, name)
	if !errors.Is(err, redislock.ErrNotReplicated) || errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Acquire(%q) = %v, want ErrNotReplicated", name, err)
	}
	if err := a.Close(); err != nil { // waits for the releases of what failed
		t.Errorf("Close = %v", err)
	}
	wantFree(t, master, name)

	b := newWaitLocker(t, s.Client(t), 0, 0)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name))
}

// TestWaitReplicasRefreshUnacknowledged pauses the replica while a lock
// taken with WaitReplicas 1 is held: its refreshes still extend the lease
// on the master, but cannot be acknowledged, so they report an unknown
// outcome (ErrNotReplicated, not ErrNotHeld) and Done closes because the
// lease could not be renewed in time, not because it was found lost.
func TestWaitReplicasRefreshUnacknowledged(t *testing.T) {
	s := testserver.StartRedisSentinelReplicated(t)
	l := newWaitLocker(t, s.Client(t), 1, 100*time.Millisecond)
	const name = "refresh-paused"
	k, err := l.Acquire(t.Context(), name, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
	}
	s.Replica.Pause(t)
	t.Cleanup(func() { s.Replica.Resume(t) })
	err = k.Refresh(t.Context())
	if !errors.Is(err, redislock.ErrNotReplicated) || errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Refresh(%q) = %v, want ErrNotReplicated and not ErrNotHeld", name, err)
	}
	select {
	case <-k.Done():
	case <-time.After(time.Minute):
		t.Fatalf("Done(%q) still open a minute after the replica stopped acknowledging", name)
	}
	cause := context.Cause(k.Context())
	if !errors.Is(cause, dlock.ErrLost) || !strings.Contains(cause.Error(), "could not be renewed in time") {
		t.Errorf("Cause(%q) = %v, want ErrLost as the lease could not be renewed in time", name, cause)
	}
}

// TestWaitReplicasClusterNode takes locks with WaitReplicas 1 on a
// replicated Cluster and checks that each WAIT ran on the master that
// holds the lock's slot (a Cluster pipeline would send the keyless WAIT
// to any node, where it would count nothing of the lock's write).
func TestWaitReplicasClusterNode(t *testing.T) {
	c := testserver.StartRedisClusterReplicated(t, 3)
	client := c.Client(t)
	l := newWaitLocker(t, client, 1, 2*time.Second)
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, name := range names {
		// Load the scripts on every master: a first EVALSHA fails
		// (NOSCRIPT) and is sent again with EVAL, and its WAIT too.
		k := testkit.MustTryAcquire(t, l, name)
		k.Refresh(t.Context())
		testkit.MustRelease(t, k)
	}
	for _, name := range names {
		node, err := client.MasterForKey(t.Context(), redislock.Key("", name))
		if err != nil {
			t.Fatal(err)
		}
		before := serverCommands(t, node)["wait"]
		k := testkit.MustTryAcquire(t, l, name)
		if err := k.Refresh(t.Context()); err != nil {
			t.Errorf("Refresh(%q) = %v, want nil", name, err)
		}
		testkit.MustRelease(t, k)
		if got := serverCommands(t, node)["wait"] - before; got != 2 {
			t.Errorf("Got(WAIT calls on %q's master) = %d, want 2 (acquire and refresh)", name, got)
		}
	}
}

// TestWaitReplicasNoReplica opens URLs with wait_replicas on servers
// without replicas: acquisitions fail with ErrNotReplicated, which shows
// the parameters took effect; wait_replicas=0 is the default.
func TestWaitReplicasNoReplica(t *testing.T) {
	r := testserver.StartRedis(t)
	cluster := testserver.StartRedisCluster(t, 3)
	for _, tc := range []struct {
		url  string
		fail bool
	}{
		{"redis://" + r.Addr() + "?wait_replicas=1&wait_timeout=50ms", true},
		{"redis://" + r.Addr() + "?wait_replicas=1", true},
		{"redis://" + r.Addr() + "?wait_replicas=0&wait_timeout=1s", false},
		{"redis+cluster://" + strings.Join(cluster.Addrs(), ",") + "?wait_replicas=1&wait_timeout=50ms", true},
	} {
		l, err := dlock.Open(t.Context(), tc.url)
		if err != nil {
			t.Errorf("Open(%q) = %v, want a Locker", tc.url, err)
			continue
		}
		k, err := l.TryAcquire(t.Context(), "n")
		switch {
		case tc.fail && !errors.Is(err, redislock.ErrNotReplicated):
			t.Errorf("Open(%q): TryAcquire = %v, want ErrNotReplicated", tc.url, err)
		case !tc.fail && err != nil:
			t.Errorf("Open(%q): TryAcquire = %v, want a lock", tc.url, err)
		case err == nil:
			testkit.MustRelease(t, k)
		}
		if err := l.Close(); err != nil {
			t.Errorf("Open(%q): Close = %v", tc.url, err)
		}
	}
	wantFree(t, r.Client(t), "n")
}
