package dlockgocron_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/extra/dlockgocron"
	"github.com/dlock-go/dlock/internal/testkit"
)

func newElector(t *testing.T, ctx context.Context, l *dlock.Locker, name string) *dlockgocron.Elector {
	t.Helper()
	e, err := dlockgocron.NewElector(ctx, l, name)
	if err != nil {
		t.Fatalf("NewElector(%q) = %v", name, err)
	}
	return e
}

func TestElectorOneLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ls := testkit.MemLockers(t, 2)
		e1 := newElector(t, t.Context(), ls[0], "leader")
		synctest.Wait() // e1 campaigned alone: it leads
		e2 := newElector(t, t.Context(), ls[1], "leader")
		synctest.Wait() // e2 waits for the name

		if err := e1.IsLeader(t.Context()); err != nil {
			t.Errorf("IsLeader of the first elector = %v, want nil", err)
		}
		if err := e2.IsLeader(t.Context()); !errors.Is(err, dlockgocron.ErrNotLeader) {
			t.Errorf("IsLeader of the second elector = %v, want ErrNotLeader", err)
		}

		// The leader closes: the other takes over.
		if err := e1.Close(); err != nil {
			t.Errorf("Close of the leader = %v, want nil", err)
		}
		if err := e1.IsLeader(t.Context()); !errors.Is(err, dlockgocron.ErrNotLeader) {
			t.Errorf("IsLeader after Close = %v, want ErrNotLeader", err)
		}
		synctest.Wait()
		if err := e2.IsLeader(t.Context()); err != nil {
			t.Errorf("IsLeader of the second elector after the leader closed = %v, want nil", err)
		}
		if err := e2.Close(); err != nil {
			t.Errorf("Close of the second elector = %v, want nil", err)
		}
		if err := e2.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
	})
}

func TestElectorLosesLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 2)
		e1 := newElector(t, t.Context(), ls[0], "leader")
		defer e1.Close()
		synctest.Wait()
		if err := e1.IsLeader(t.Context()); err != nil {
			t.Fatalf("IsLeader = %v, want nil", err)
		}
		// The lease vanishes and another owner takes the name: the
		// renewal finds it gone, and e1 stops leading.
		store.Expire("leader")
		k, err := ls[1].TryAcquire(t.Context(), "leader")
		if err != nil {
			t.Fatalf("TryAcquire(%q) after expiry = %v, want a lock", "leader", err)
		}
		time.Sleep(driver.DefaultTTL) // a renewal is due within it
		synctest.Wait()
		if err := e1.IsLeader(t.Context()); !errors.Is(err, dlockgocron.ErrNotLeader) {
			t.Errorf("IsLeader after the loss = %v, want ErrNotLeader", err)
		}
		// The other owner releases: e1 campaigned again and leads.
		k.Release(t.Context())
		synctest.Wait()
		if err := e1.IsLeader(t.Context()); err != nil {
			t.Errorf("IsLeader after the other owner released = %v, want nil", err)
		}
	})
}

func TestElectorEndsWithLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ls := testkit.MemLockers(t, 1)
		e := newElector(t, t.Context(), ls[0], "leader")
		synctest.Wait()
		ls[0].Close()
		synctest.Wait()
		err := e.IsLeader(t.Context())
		if !errors.Is(err, dlockgocron.ErrNotLeader) || !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("IsLeader after the Locker closed = %v, want ErrNotLeader and ErrClosed", err)
		}
		if err := e.Close(); !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("Close after the Locker closed = %v, want ErrClosed", err)
		}
	})
}

func TestElectorEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ls := testkit.MemLockers(t, 1)
		ctx, cancel := context.WithCancel(t.Context())
		e := newElector(t, ctx, ls[0], "leader")
		synctest.Wait()
		cancel()
		synctest.Wait()
		if err := e.IsLeader(t.Context()); !errors.Is(err, dlockgocron.ErrNotLeader) {
			t.Errorf("IsLeader after ctx ended = %v, want ErrNotLeader", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close after ctx ended = %v, want nil", err)
		}
	})
}

func TestNewElectorInvalid(t *testing.T) {
	_, ls := testkit.MemLockers(t, 1)
	if _, err := dlockgocron.NewElector(t.Context(), nil, "leader"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewElector(nil Locker) = %v, want ErrInvalid", err)
	}
	if _, err := dlockgocron.NewElector(t.Context(), ls[0], ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewElector(%q) = %v, want ErrInvalid", "", err)
	}
}
