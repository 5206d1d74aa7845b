package natslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{"hold": testworker.Hold})
	m.Run()
}

// ttl is the holders' lease in the fault tests: short, so that losses
// come soon, and long against the machine's noise.
const ttl = 3 * time.Second

// doneAt returns a channel that gets the time k's Done closed.
func doneAt(k *dlock.Lock) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() { // exits when k's Done closes, by the test's end
		<-k.Done()
		ch <- time.Now()
	}()
	return ch
}

// wantDone waits up to limit for the time k's Done closed, and checks
// that it closed for a loss.
func wantDone(t *testing.T, k *dlock.Lock, at <-chan time.Time, limit time.Duration, what string) time.Time {
	t.Helper()
	select {
	case d := <-at:
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("%s: context.Cause = %v, want ErrLost", what, cause)
		}
		return d
	case <-time.After(limit):
		t.Fatalf("%s: the holder's Done still open after %v", what, limit)
		return time.Time{}
	}
}

// wantAfter checks that the waiter r got the lock after the holder's
// Done closed (at done), with a higher token than fence.
func wantAfter(t *testing.T, r testkit.Acquired, done time.Time, fence uint64) {
	t.Helper()
	if r.At.Before(done) {
		t.Errorf("the waiter acquired at %v, before the holder's Done closed at %v", r.At.Format(time.StampMicro), done.Format(time.StampMicro))
	}
	if r.Lock.Fence() <= fence {
		t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), fence)
	}
	testkit.MustRelease(t, r.Lock)
}

func TestFaults(t *testing.T) {
	n := testserver.StartNATS(t)
	kv := bucket(t, n.URL(), "faults", 1)

	// A holder process killed with SIGKILL (the adversary: a holder that
	// never releases nor renews) keeps the name until a waiter has seen
	// its last renewal unchanged for the TTL; then the waiter gets it,
	// with a higher token.
	t.Run("HolderKilled", func(t *testing.T) {
		name := testkit.UniqueName(t, "killed")
		cmd, fence := testworker.StartHolder(t, n.URL()+"/faults", name, ttl)
		got := testkit.AcquireAsync(t.Context(), newLocker(t, kv), name)
		testkit.WantWaiting(t, got, name)
		cmd.Kill(t)
		killed := time.Now()
		r := testkit.WantAcquired(t, got, name, 3*ttl+10*time.Second)
		d := r.At.Sub(killed)
		t.Logf("the waiter acquired %v after the holder was killed (TTL %v)", d, ttl)
		// The holder renewed at most TTL/3 before the kill; the waiter
		// waits a TTL from its first look at that renewal.
		if d < ttl/2 {
			t.Errorf("the waiter acquired %v after the kill, before the holder's %v lease can have run out", d, ttl)
		}
		wantAfter(t, r, killed, fence)
	})

	// The server is paused (SIGSTOP, the adversary: a store that hangs
	// with its connections open) while a lock is held and a waiter waits:
	// the holder's Done closes, nobody else acquires while the server is
	// paused, and after it resumes the waiter gets the name.
	t.Run("ServerPaused", func(t *testing.T) {
		name := testkit.UniqueName(t, "paused")
		k := testkit.MustTryAcquire(t, newLocker(t, kv), name, dlock.WithTTL(ttl))
		at := doneAt(k)
		got := testkit.AcquireAsync(t.Context(), newLocker(t, kv), name)
		testkit.WantWaiting(t, got, name)
		n.Pause(t)
		done := wantDone(t, k, at, ttl+5*time.Second, "server paused")
		testkit.WantWaiting(t, got, name) // nothing can be written meanwhile
		n.Resume(t)
		r := testkit.WantAcquired(t, got, name, 3*ttl+20*time.Second)
		wantAfter(t, r, done, k.Fence())
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Release of the lock lost in the pause = %v, want ErrNotHeld", err)
		}
	})

	// The server is killed and restarted over its store (-sd) within the
	// holder's lease (the adversary: a crash of the store): the holder
	// keeps its lock and renews it once the client has reconnected, the
	// waiter still waits, and gets the name with a higher token once the
	// holder releases.
	t.Run("ServerRestarted", func(t *testing.T) {
		name := testkit.UniqueName(t, "restarted")
		k := testkit.MustTryAcquire(t, newLocker(t, kv), name) // driver.DefaultTTL (30 s), longer than the outage
		got := testkit.AcquireAsync(t.Context(), newLocker(t, kv), name)
		testkit.WantWaiting(t, got, name)
		n.Kill(t)
		n.Restart(t)
		testkit.Retry(t, "Refresh after the restart", func(ctx context.Context) error {
			err := k.Refresh(ctx)
			if errors.Is(err, dlock.ErrNotHeld) {
				t.Fatalf("Refresh after the restart = %v, want the lock kept", err)
			}
			return err
		})
		testkit.WantWaiting(t, got, name)
		testkit.MustRelease(t, k)
		r := testkit.WantAcquired(t, got, name, 20*time.Second)
		wantAfter(t, r, time.Time{}, k.Fence())
	})

	// The holder's connection is partitioned (the adversary: a network
	// that drops every packet between the holder and the server, while
	// the waiter still reaches it): the holder's Done closes before the
	// waiter gets the name.
	t.Run("HolderPartitioned", func(t *testing.T) {
		name := testkit.UniqueName(t, "partitioned")
		p := testserver.StartProxy(t, n.Addr())
		k := testkit.MustTryAcquire(t, newLocker(t, bucket(t, "nats://"+p.Addr(), "faults", 1)), name, dlock.WithTTL(ttl))
		at := doneAt(k)
		got := testkit.AcquireAsync(t.Context(), newLocker(t, kv), name)
		testkit.WantWaiting(t, got, name)
		p.Partition(t)
		t.Cleanup(func() { p.Heal(t) })
		r := testkit.WantAcquired(t, got, name, 3*ttl+10*time.Second)
		done := wantDone(t, k, at, 5*time.Second, "holder partitioned")
		wantAfter(t, r, done, k.Fence())
	})
}
