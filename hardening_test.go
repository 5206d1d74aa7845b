package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// An Acquire whose driver step is under way when Close begins must not
// leave the lease it then takes behind: Close waits for it, and it
// releases what it took.
func TestCloseDuringAcquireLeavesNothingHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, d := newFaulty(store, true)
		hang := make(chan struct{})
		d.hangAcquire = hang
		acquired := make(chan error, 1)
		go func() {
			_, err := l.Acquire(context.Background(), "a")
			acquired <- err
		}()
		synctest.Wait() // the step is under way in the driver
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		synctest.Wait()
		close(hang) // the step completes after Close began: the server grants it
		if err := <-closed; err != nil {
			t.Fatalf("Close = %v", err)
		}
		if owner, _, held := store.Holder("a"); held {
			t.Fatalf("after Close returned, the store shows %q held by %s, want free", "a", owner)
		}
		if err := <-acquired; !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Acquire racing Close = %v, want ErrClosed", err)
		}
		if owner, _, held := store.Holder("a"); held {
			t.Fatalf("after Acquire returned ErrClosed, the store shows %q held by %s, want free", "a", owner)
		}
	})
}

// Refresh must not report success for a lock the keeper declared lost
// while the refresh was under way.
func TestRefreshReportsLossDuringCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		const ttl = time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		time.Sleep(ttl / 2)
		d.mu.Lock()
		d.refreshDelay = ttl // the reply arrives after the loss deadline (0.9 TTL)
		d.mu.Unlock()
		err = k.Refresh(t.Context())
		if !testkit.IsClosed(k.Done()) {
			t.Fatalf("Done still open after the loss deadline passed during Refresh")
		}
		if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Refresh that returned after Done closed = %v, want ErrNotHeld wrapping ErrLost", err)
		}
	})
}

var errMyCause = errors.New("request abandoned")

// Errors of a cancelled Acquire wrap both ctx.Err() and the cause.
func TestAcquireErrorWrapsCtxErrAndCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, queued := range []bool{false, true} {
			store := memlock.NewStore()
			var l *dlock.Locker
			if queued {
				l = newQueued(store)
			} else {
				l, _ = newFaulty(store, true)
			}
			holder, _ := memlock.New(store)
			k, _ := holder.TryAcquire(t.Context(), "a")

			ctx, cancel := context.WithCancelCause(t.Context())
			go func() {
				time.Sleep(time.Second)
				cancel(errMyCause)
			}()
			_, err := l.Acquire(ctx, "a")
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errMyCause) {
				t.Errorf("queued=%v: Acquire cancelled with a cause = %v, want it to wrap context.Canceled and the cause", queued, err)
			}
			_, err = l.TryAcquire(ctx, "a") // ctx already ended
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errMyCause) {
				t.Errorf("queued=%v: TryAcquire with an ended ctx = %v, want it to wrap context.Canceled and the cause", queued, err)
			}
			k.Release(t.Context())
			l.Close()
			holder.Close()
		}
	})
}

// queuedDriver offers memlock's steps as a Queuer: AcquireQueued retries
// Acquire on memlock's notifications.
type queuedDriver struct{ driver.Driver }

func (q queuedDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	wake, stop, err := q.Driver.(driver.Notifier).Watch(ctx, l.Name)
	if err != nil {
		return driver.Result{}, err
	}
	defer stop()
	for {
		res, err := q.Driver.Acquire(ctx, l)
		if err != nil || res.Acquired {
			return res, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return driver.Result{}, ctx.Err()
		}
	}
}

func newQueued(store *memlock.Store) *dlock.Locker {
	return lockerOver(queuedDriver{store.Driver()})
}

// The README's pattern, defer lock.Release(ctx), must free the lock even
// when ctx ended first, and say so: nil, the name free when it returns.
func TestReleaseWithEndedContextFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		for _, faulty := range []bool{false, true} {
			func() {
				var l *dlock.Locker
				if faulty { // not inline: the core guards each call with a goroutine
					l, _ = newFaulty(store, true)
				} else {
					l, _ = memlock.New(store)
				}
				defer l.Close()
				ctx, cancel := context.WithCancel(t.Context())
				k, err := l.Acquire(ctx, "a")
				if err != nil {
					t.Fatalf("Acquire = %v", err)
				}
				cancel()
				// Adversary: a cancelled request's deferred Release. It
				// used to return "context canceled (the release goes on
				// in the background)" although it freed the name.
				if err := k.Release(ctx); err != nil {
					t.Errorf("faulty=%v: Release with an ended ctx = %v, want nil: the name was freed", faulty, err)
				}
				// No synctest.Wait: freed before Release returned.
				if owner, _, held := store.Holder("a"); held {
					t.Fatalf("faulty=%v: after Release with an ended ctx, %q is still held by %s", faulty, "a", owner)
				}
				if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
					t.Errorf("second Release = %v, want ErrNotHeld", err)
				}
			}()
		}
	})
}

type traceKey struct{}

// A Release whose store does not answer gives up after a few seconds,
// not sooner, and runs with the values of its ctx: also a release made a
// while after another (cleanup steps share deadlines), and with a ctx
// that cannot end as well as with one that can.
func TestStalledReleaseIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), false)
		defer l.Close()
		live, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, ctx := range []context.Context{context.Background(), live} {
			ctx = context.WithValue(ctx, traceKey{}, "trace-2")
			k1, err := l.Acquire(ctx, "a")
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			k2, err := l.Acquire(ctx, "b")
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			if err := k1.Release(ctx); err != nil {
				t.Fatalf("Release = %v", err)
			}
			time.Sleep(time.Second)
			d.mu.Lock()
			d.hangRelease = true
			d.mu.Unlock()
			start := time.Now()
			err = k2.Release(ctx)
			if took := time.Since(start); took < 4500*time.Millisecond || took > 5*time.Second {
				t.Errorf("Release on a stalled store took %v, want 4.5 s to 5 s", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Release on a stalled store = %v, want an error wrapping DeadlineExceeded", err)
			}
			d.mu.Lock()
			d.hangRelease = false
			for i, v := range d.releaseValues {
				if v != "trace-2" {
					t.Errorf("Release call %d saw ctx value %v, want %q", i, v, "trace-2")
				}
			}
			d.releaseValues = nil
			d.mu.Unlock()
		}
	})
}

// Lock.Context carries the values of Acquire's ctx, not its cancellation
// (nor its deadline, nor its cause, also in contexts derived from it).
func TestLockContextKeepsValues(t *testing.T) {
	l, _ := memlock.New(nil)
	defer l.Close()
	errGone := errors.New("caller gone")
	ctx, cancel := context.WithCancelCause(context.WithValue(t.Context(), traceKey{}, "trace-1"))
	ctx, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	k, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	cancel(errGone)
	if got := k.Context().Value(traceKey{}); got != "trace-1" {
		t.Errorf("Lock.Context().Value(traceKey) = %v, want %q", got, "trace-1")
	}
	if testkit.IsClosed(k.Done()) {
		t.Errorf("Lock.Done closed when Acquire's ctx was cancelled, want it open while held")
	}
	child, stopChild := context.WithCancel(k.Context())
	defer stopChild()
	for what, c := range map[string]context.Context{"Lock.Context()": k.Context(), "a child of Lock.Context()": child} {
		if err, cause := c.Err(), context.Cause(c); err != nil || cause != nil {
			t.Errorf("%s: Err, Cause = %v, %v after Acquire's ctx was cancelled, want nil, nil", what, err, cause)
		}
		if d, ok := c.Deadline(); ok {
			t.Errorf("%s: Deadline() = %v, want none (Acquire's deadline is not the lock's)", what, d)
		}
	}
	// A re-entered handle sees the same values.
	k2, err := l.Acquire(k.Context(), "a")
	if err != nil {
		t.Fatalf("re-entering Acquire = %v", err)
	}
	if got := k2.Context().Value(traceKey{}); got != "trace-1" {
		t.Errorf("re-entered Lock.Context().Value(traceKey) = %v, want %q", got, "trace-1")
	}
	k2.Release(t.Context())
	if testkit.IsClosed(k.Done()) {
		t.Errorf("first handle's Done closed by the re-entered handle's Release, want it open")
	}
	if cause := context.Cause(k2.Context()); cause != dlock.ErrReleased {
		t.Errorf("Cause(re-entered Lock.Context()) = %v after its Release, want ErrReleased", cause)
	}
	k.Release(t.Context())
	if cause := context.Cause(child); cause != dlock.ErrReleased {
		t.Errorf("Cause(child of Lock.Context()) = %v after Release, want ErrReleased", cause)
	}
}

// A store that answers later than the loss deadline allows must not make
// Acquire hand out a handle whose deadline has passed.
func TestNoHandleHandedOutExpired(t *testing.T) {
	const ttl = 10 * time.Second
	t.Run("lease still ours", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memlock.NewStore()
			l, d := newFaulty(store, true)
			defer l.Close()
			d.acquireDelay = func(n int) time.Duration { return ttl * 95 / 100 } // past 0.9 TTL
			for _, try := range []bool{false, true} {
				var k *dlock.Lock
				var err error
				if try {
					k, err = l.TryAcquire(t.Context(), "try", dlock.WithTTL(ttl))
				} else {
					k, err = l.Acquire(t.Context(), "wait", dlock.WithTTL(ttl))
				}
				if err != nil {
					t.Fatalf("try=%v: Acquire with a slow reply = %v, want a lock (the lease is still ours)", try, err)
				}
				synctest.Wait()
				if testkit.IsClosed(k.Done()) {
					t.Fatalf("try=%v: Acquire handed out a lock whose Done closed at once: %v", try, context.Cause(k.Context()))
				}
				time.Sleep(ttl / 2) // and it has real time left
				if testkit.IsClosed(k.Done()) {
					t.Fatalf("try=%v: lock lost %v after it was handed out: %v", try, ttl/2, context.Cause(k.Context()))
				}
				k.Release(t.Context())
			}
		})
	})
	t.Run("lease ran out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memlock.NewStore()
			l, d := newFaulty(store, true)
			defer l.Close()
			d.acquireDelay = func(n int) time.Duration {
				if n == 1 {
					return ttl + time.Second // the server's lease is gone by the reply
				}
				return 0
			}
			other, _ := memlock.New(store)
			defer other.Close()
			go func() {
				time.Sleep(ttl + time.Second/2)
				if k, err := other.TryAcquire(context.Background(), "a", dlock.WithTTL(time.Hour)); err == nil {
					time.Sleep(time.Second)
					k.Release(context.Background())
				}
			}()
			start := time.Now()
			k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			defer k.Release(t.Context())
			if waited := time.Since(start); waited < ttl+3*time.Second/2 {
				t.Fatalf("Acquire returned after %v, before the other owner (who took the expired lease) released at %v", waited, ttl+3*time.Second/2)
			}
			synctest.Wait()
			if testkit.IsClosed(k.Done()) {
				t.Fatalf("Acquire handed out a lock whose Done closed at once: %v", context.Cause(k.Context()))
			}
		})
	})
}

// Re-entering keeps the acquisition's options: the TTL of the re-entering
// call is ignored, and a bad option is still an error.
func TestReenterKeepsFirstOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := memlock.New(nil)
		defer l.Close()
		const ttl = 10 * time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		k2, err := l.Acquire(k.Context(), "a", dlock.WithTTL(time.Hour))
		if err != nil {
			t.Fatalf("re-entering Acquire = %v", err)
		}
		if k2.Fence() != k.Fence() {
			t.Errorf("re-entered Fence = %d, want %d", k2.Fence(), k.Fence())
		}
		if _, err := l.Acquire(k.Context(), "a", dlock.WithTTL(time.Millisecond)); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("re-entering with a bad TTL = %v, want ErrInvalid", err)
		}
		time.Sleep(ttl) // past the first TTL, not the re-entering one
		if !testkit.IsClosed(k2.Done()) {
			t.Errorf("re-entered handle still open after the first acquisition's %v lease (WithoutRenewal), want the re-entering options ignored", ttl)
		}
	})
}

// A session-wide loss closes every lock; a loss naming one owner closes
// only that lock.
func TestDriverLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		d := &lossDriver{Driver: store.Driver(), losses: make(chan driver.Loss, 1)}
		l := lockerOver(d)
		defer l.Close()
		var ks []*dlock.Lock
		for _, name := range []string{"a", "b", "c"} {
			k, err := l.Acquire(t.Context(), name)
			if err != nil {
				t.Fatalf("Acquire(%q) = %v", name, err)
			}
			ks = append(ks, k)
		}
		d.losses <- driver.Loss{Owner: d.owner("b"), Err: errors.New("node deleted")}
		synctest.Wait()
		if testkit.IsClosed(ks[0].Done()) || !testkit.IsClosed(ks[1].Done()) || testkit.IsClosed(ks[2].Done()) {
			t.Fatalf("after a loss of b: Done closed = %v %v %v, want false true false", testkit.IsClosed(ks[0].Done()), testkit.IsClosed(ks[1].Done()), testkit.IsClosed(ks[2].Done()))
		}
		d.losses <- driver.Loss{Err: errors.New("session expired")}
		synctest.Wait()
		for i, k := range ks {
			if !testkit.IsClosed(k.Done()) || !errors.Is(context.Cause(k.Context()), dlock.ErrLost) {
				t.Errorf("lock %d after a session-wide loss: Done closed %v, cause %v; want closed with ErrLost", i, testkit.IsClosed(k.Done()), context.Cause(k.Context()))
			}
		}
	})
}

type lossDriver struct {
	driver.Driver
	losses chan driver.Loss
}

func (d *lossDriver) Losses() <-chan driver.Loss { return d.losses }

func (d *lossDriver) owner(name string) string {
	hs, _ := d.Driver.(driver.Inspector).Inspect(context.Background(), []string{name})
	return hs[0].Owner
}

// Re-entered handles can be released in any order: each Release closes
// only its own Done and the name stays held until the last one; a loss
// closes the Done of every handle still open, with the loss as cause.
func TestHandlesReleasedInAnyOrder(t *testing.T) {
	store := memlock.NewStore()
	l, _ := memlock.New(store)
	defer l.Close()
	outer, err := l.Acquire(t.Context(), "a")
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	ks := []*dlock.Lock{outer}
	for range 3 {
		k, err := l.Acquire(outer.Context(), "a")
		if err != nil {
			t.Fatalf("re-entering Acquire = %v", err)
		}
		ks = append(ks, k)
	}
	for _, i := range []int{2, 0} { // a middle handle, then the first
		if err := ks[i].Release(t.Context()); err != nil {
			t.Fatalf("Release(handle %d) = %v", i, err)
		}
		if cause := context.Cause(ks[i].Context()); cause != dlock.ErrReleased {
			t.Errorf("Cause(handle %d) = %v after its Release, want ErrReleased", i, cause)
		}
		for _, j := range []int{1, 3} {
			if testkit.IsClosed(ks[j].Done()) {
				t.Fatalf("handle %d's Done closed by the Release of handle %d, want open", j, i)
			}
		}
		if _, _, held := store.Holder("a"); !held {
			t.Fatalf("%q free with handles 1 and 3 open, want held", "a")
		}
	}
	k, err := l.Acquire(ks[3].Context(), "a")
	if err != nil {
		t.Fatalf("re-entering Acquire after Releases = %v", err)
	}
	ks = append(ks, k)
	store.Expire("a")
	if err := ks[1].Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Refresh after Expire = %v, want ErrNotHeld", err)
	}
	for _, j := range []int{1, 3, 4} {
		if cause := context.Cause(ks[j].Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("Cause(handle %d) = %v after the loss, want ErrLost", j, cause)
		}
		if err := ks[j].Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Release(handle %d) after the loss = %v, want ErrNotHeld and ErrLost", j, err)
		}
	}
}

// shortDriver breaks the driver contract the way a buggy third-party
// backend could: its Refresh returns no result at all.
type shortDriver struct{ driver.Driver }

func (shortDriver) Refresh(context.Context, []driver.Lease) []error { return nil }

// TestShortRefreshResult attacks the core with a driver whose Refresh
// returns fewer results than leases: Lock.Refresh returns an error that
// says so, and the keeper's renewals fail the same way until the lock is
// lost with its lease, where the core used to index past the end and
// panic a worker goroutine, taking the process down.
func TestShortRefreshResult(t *testing.T) {
	l := dlock.NewLocker(shortDriver{memlock.NewStore().Driver()}, driver.LockerOptions{})
	defer l.Close()
	k, err := l.Acquire(t.Context(), "short", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatalf("Acquire = %v, want a lock", err)
	}
	if err := k.Refresh(t.Context()); err == nil || !strings.Contains(err.Error(), "returned 0 results for 1 leases") {
		t.Errorf("Refresh with a driver returning no result = %v, want an error saying so", err)
	}
	select {
	case <-k.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lock is still held 30 s after its 300 ms lease, though no renewal could succeed")
	}
	if err := context.Cause(k.Context()); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("cause of the loss = %v, want ErrLost", err)
	}
}
