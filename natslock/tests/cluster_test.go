package natslock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestClusterLeaderKilled holds a lock on a bucket of 3 replicas while two
// waiters wait, then kills the stream's leader with SIGKILL (the
// adversary: a leader election under a held lock and queued waiters, and
// the requests it swallows without a reply). Every later holder must hold
// alone, tokens must rise from holder to holder across the election, and
// both waiters must get the lock: a waiter tries again after an error
// that says the stream did not answer, as a caller would, so a step that
// waited for a reply until the caller's context ended (every request
// unbounded below it, before natslock's requestTimeout) fails the test.
func TestClusterLeaderKilled(t *testing.T) {
	c := testserver.StartNATSCluster(t, 3)
	kv := bucket(t, c.URL(), "cluster", 3)
	name := "cluster/leader-killed"
	first, err := newLocker(t, kv).Acquire(t.Context(), name, dlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", name, err)
	}
	var (
		inside atomic.Int32
		mu     sync.Mutex
		fences = []uint64{first.Fence()}
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range 2 {
		l := newLocker(t, kv)
		wg.Go(func() {
			k, err := acquireSoon(ctx, t, l, name, i)
			if err != nil {
				t.Errorf("waiter's Acquire(%q) = %v", name, err)
				return
			}
			if n := inside.Add(1); n != 1 {
				t.Errorf("%d holders of %q at once, want 1", n, name)
			}
			mu.Lock()
			fences = append(fences, k.Fence())
			mu.Unlock()
			inside.Add(-1)
			releaseSoon(ctx, t, k)
		})
	}
	c.StreamLeader(t, "KV_cluster").Kill(t)
	releaseSoon(ctx, t, first)
	wg.Wait()
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("tokens in the order held = %v, want strictly rising", fences)
		}
	}
	t.Logf("tokens in the order held, across the election: %v", fences)
	if len(fences) != 3 {
		t.Errorf("%d holds of %q, want 3 (the first and two waiters)", len(fences), name)
	}
}

// acquireSoon acquires name on l, trying again after an error that says
// the stream did not answer (see transient), as a caller would across an
// election; waiter numbers the caller in the log.
func acquireSoon(ctx context.Context, t *testing.T, l *dlock.Locker, name string, waiter int) (*dlock.Lock, error) {
	t.Helper()
	for {
		k, err := l.Acquire(ctx, name, dlock.WithTTL(2*time.Second))
		if err == nil || ctx.Err() != nil || !transient(err) {
			return k, err
		}
		t.Logf("waiter %d: Acquire(%q) = %v; trying again", waiter, name, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// transient reports whether err says the stream did not answer, as the
// NATS client says it while the stream has no leader: no responders to a
// request of the JetStream API (nats.ErrNoResponders) or to a write
// (jetstream.ErrNoStreamResponse), JetStream's 503 for a stream group
// without a leader, or no reply to a request within natslock's bound on
// one (nats.ErrTimeout: a request lost with the killed leader, or dropped
// by a replica that still took the killed server for the leader).
func transient(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.As(err, &api) && api.Code == 503
}

// releaseSoon releases k, trying again while the cluster elects a leader
// (a transient error); a lock lost meanwhile (ErrNotHeld) is released
// too.
func releaseSoon(ctx context.Context, t *testing.T, k *dlock.Lock) {
	t.Helper()
	for {
		err := k.Release(ctx)
		if err == nil || errors.Is(err, dlock.ErrNotHeld) {
			return
		}
		if ctx.Err() != nil {
			t.Errorf("Release = %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
