package sessionlocktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TestModes checks shared holds and semaphores against the store's
// queue: entries of every mode are counted directly on the server.
func TestModes(t *testing.T, q Queue) {
	// A request of another kind fails at once, waiting or not, and
	// leaves no entry behind; the holder keeps the name.
	t.Run("ModeMismatch", func(t *testing.T) {
		name := "mismatch/" + t.Name()
		a, b := q.NewLocker(t), q.NewLocker(t)
		k := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
		for _, c := range []struct {
			what string
			opts []dlock.Option
		}{
			{"exclusive", nil},
			{"shared", []dlock.Option{dlock.Shared()}},
			{"with another limit", []dlock.Option{dlock.WithLimit(3)}},
		} {
			if _, err := b.TryAcquire(t.Context(), name, c.opts...); !errors.Is(err, dlock.ErrInvalid) {
				t.Errorf("TryAcquire(%q) %s on a semaphore of 2 = %v, want ErrInvalid", name, c.what, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			start := time.Now()
			_, err := b.Acquire(ctx, name, c.opts...)
			timedOut := ctx.Err() != nil
			cancel()
			if !errors.Is(err, dlock.ErrInvalid) || timedOut {
				t.Errorf("Acquire(%q) %s on a semaphore of 2 = %v after %v, want ErrInvalid at once", name, c.what, err, time.Since(start))
			}
		}
		WaitEntries(t, q, name, 1)
		testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name, dlock.WithLimit(2)))
		testkit.MustRelease(t, k)
		WaitEntries(t, q, name, 0)
	})

	// A writer waiting behind a reader (other Lockers) is not overtaken
	// by readers that come after it, waiting or trying; they hold
	// together once it leaves, with fences above its own.
	t.Run("WriterPreference", func(t *testing.T) {
		name := "writer/" + t.Name()
		r1, w, r2, r3 := q.NewLocker(t), q.NewLocker(t), q.NewLocker(t), q.NewLocker(t)
		k1 := testkit.MustTryAcquire(t, r1, name, dlock.Shared())
		gotW := testkit.AcquireAsync(t.Context(), w, name)
		WaitEntries(t, q, name, 2)
		if _, err := r2.TryAcquire(t.Context(), name, dlock.Shared()); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire(%q, Shared) behind a waiting writer = %v, want ErrNotAcquired", name, err)
		}
		WaitEntries(t, q, name, 2) // the try left nothing
		got2 := testkit.AcquireAsync(t.Context(), r2, name, dlock.Shared())
		WaitEntries(t, q, name, 3)
		got3 := testkit.AcquireAsync(t.Context(), r3, name, dlock.Shared())
		WaitEntries(t, q, name, 4)
		testkit.WantWaiting(t, gotW, name)
		testkit.WantWaiting(t, got2, name)
		testkit.MustRelease(t, k1)
		kw := testkit.WantAcquired(t, gotW, name, 10*time.Second).Lock
		testkit.WantWaiting(t, got2, name)
		testkit.MustRelease(t, kw)
		k2 := testkit.WantAcquired(t, got2, name, 10*time.Second).Lock
		k3 := testkit.WantAcquired(t, got3, name, 10*time.Second).Lock
		if !(k1.Fence() < kw.Fence() && kw.Fence() < k2.Fence() && k2.Fence() < k3.Fence()) {
			t.Errorf("fences reader %d, writer %d, readers %d and %d; want strictly increasing in queue order", k1.Fence(), kw.Fence(), k2.Fence(), k3.Fence())
		}
		testkit.MustRelease(t, k2)
		testkit.MustRelease(t, k3)
		WaitEntries(t, q, name, 0)
	})

	// Cancelled waits of a reader behind a writer and of a permit on a
	// full semaphore leave no entry on the server.
	t.Run("CancelledWaitsLeaveNothing", func(t *testing.T) {
		for _, c := range []struct {
			what       string
			hold, wait []dlock.Option
		}{
			{"reader behind a writer", nil, []dlock.Option{dlock.Shared()}},
			{"permit on a full semaphore", []dlock.Option{dlock.WithLimit(1)}, []dlock.Option{dlock.WithLimit(1)}},
			{"writer behind a reader", []dlock.Option{dlock.Shared()}, nil},
		} {
			name := fmt.Sprintf("cancelled/%s/%s", t.Name(), c.what)
			a, b := q.NewLocker(t), q.NewLocker(t)
			k := testkit.MustTryAcquire(t, a, name, c.hold...)
			ctx, cancel := context.WithCancel(t.Context())
			got := testkit.AcquireAsync(ctx, b, name, c.wait...)
			WaitEntries(t, q, name, 2)
			cancel()
			if r := <-got; !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("%s: cancelled Acquire(%q) = %v, want context.Canceled", c.what, name, r.Err)
			}
			WaitEntries(t, q, name, 1)
			testkit.MustRelease(t, k)
			WaitEntries(t, q, name, 0)
		}
	})

	// A permit freed out of order (not the oldest) lets the first
	// waiter in at once: it waits on every one of the n permits ahead
	// of it, not only on the one n places ahead.
	t.Run("PermitFreedOutOfOrder", func(t *testing.T) {
		name := "outoforder/" + t.Name()
		a, b, c := q.NewLocker(t), q.NewLocker(t), q.NewLocker(t)
		ka := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
		kb := testkit.MustTryAcquire(t, b, name, dlock.WithLimit(2))
		got := testkit.AcquireAsync(t.Context(), c, name, dlock.WithLimit(2))
		WaitEntries(t, q, name, 3)
		testkit.WantWaiting(t, got, name)
		testkit.MustRelease(t, kb)
		kc := testkit.WantAcquired(t, got, name, 10*time.Second).Lock
		if kc.Fence() <= kb.Fence() {
			t.Errorf("new permit's fence %d, want above %d", kc.Fence(), kb.Fence())
		}
		testkit.MustRelease(t, ka)
		testkit.MustRelease(t, kc)
		WaitEntries(t, q, name, 0)
	})

	// ForceRelease deletes every holder's entry and none of the
	// waiters': the waiting writer gets the name.
	t.Run("ForceReleaseKeepsWaiters", func(t *testing.T) {
		name := "force/" + t.Name()
		r1, r2, w, admin := q.NewLocker(t), q.NewLocker(t), q.NewLocker(t), q.NewLocker(t)
		k1 := testkit.MustTryAcquire(t, r1, name, dlock.Shared())
		k2 := testkit.MustTryAcquire(t, r2, name, dlock.Shared())
		gotW := testkit.AcquireAsync(t.Context(), w, name)
		WaitEntries(t, q, name, 3)
		if held, err := admin.ForceRelease(t.Context(), name); !held || err != nil {
			t.Fatalf("ForceRelease(%q) = %v, %v; want true, nil", name, held, err)
		}
		kw := testkit.WantAcquired(t, gotW, name, 10*time.Second).Lock
		for _, k := range []*dlock.Lock{k1, k2} {
			if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) && !errors.Is(err, dlock.ErrLost) {
				t.Errorf("Refresh of a force-released reader = %v, want ErrNotHeld or ErrLost", err)
			}
		}
		testkit.MustRelease(t, kw)
		WaitEntries(t, q, name, 0)
	})

	// Observe is pushed by the store's watch: with a retry interval of
	// an hour, changes still arrive at once.
	t.Run("ObservePushed", func(t *testing.T) {
		if q.NewLockerRetry == nil {
			t.Fatal("sessionlocktest: NewLockerRetry is required")
		}
		name := "observe/" + t.Name()
		o, a := q.NewLockerRetry(t, time.Hour), q.NewLocker(t)
		ch, err := o.Observe(t.Context(), name)
		if err != nil {
			t.Fatalf("Observe(%q) = %v", name, err)
		}
		next := func(what string) []dlock.LockInfo {
			t.Helper()
			select {
			case infos := <-ch:
				return infos
			case <-time.After(10 * time.Second):
				t.Fatalf("Observe(%q) sent nothing within 10s %s", name, what)
				return nil
			}
		}
		if infos := next("at first"); len(infos) != 0 {
			t.Fatalf("Observe(%q) first sent %+v, want no holder", name, infos)
		}
		k := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(3))
		if infos := next("after a permit was taken"); len(infos) != 1 || infos[0].Owner != k.Owner() || infos[0].Limit != 3 {
			t.Fatalf("Observe(%q) sent %+v, want %s's permit of 3", name, infos, k.Owner())
		}
		testkit.MustRelease(t, k)
		if infos := next("after the permit was released"); len(infos) != 0 {
			t.Fatalf("Observe(%q) sent %+v, want no holder", name, infos)
		}
	})
}
