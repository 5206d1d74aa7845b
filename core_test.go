package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// faultDriver wraps memlock's driver to count calls and inject faults. It
// hides memlock's Notifier unless notify is set.
type faultDriver struct {
	driver.Driver
	mu            sync.Mutex
	refreshes     []int       // batch sizes, in order
	refreshTimes  []time.Time // when each batch was sent
	refreshErr    func(call int) error
	hangRefresh   bool                 // block Refresh until ctx ends
	hangAcquire   chan struct{}        // if set, Acquire waits for it, ignoring ctx
	hangRelease   bool                 // block Release until ctx ends
	releaseErr    func(call int) error // if set and not nil for Release call n (from 1), fail it so
	releaseCalls  int
	releaseValues []any // ctx.Value(traceKey{}) of each Release call
	acquireCalls  int
	notify        bool
	silentWatches bool // Watch succeeds but never wakes
	// acquireDelay, if set, is how long Acquire call n (from 1) waits
	// after the store took its step and before it returns.
	acquireDelay func(call int) time.Duration
	// refreshDelay, likewise, for Refresh calls.
	refreshDelay time.Duration
	// steps logs "refresh", "refreshed" and "extend" as Refresh starts
	// and ends and Extend starts.
	steps []string
}

func (d *faultDriver) Extend(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	d.steps = append(d.steps, "extend")
	d.mu.Unlock()
	return d.Driver.(driver.Extender).Extend(ctx, l)
}

func (d *faultDriver) log(step string) {
	d.mu.Lock()
	d.steps = append(d.steps, step)
	d.mu.Unlock()
}

func (d *faultDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	d.mu.Lock()
	d.acquireCalls++
	hang := d.hangAcquire
	d.mu.Unlock()
	if hang != nil {
		<-hang
		return d.Driver.Acquire(context.Background(), l)
	}
	res, err := d.Driver.Acquire(ctx, l)
	d.mu.Lock()
	delay := d.acquireDelay
	n := d.acquireCalls
	d.mu.Unlock()
	if delay != nil {
		time.Sleep(delay(n))
	}
	return res, err
}

func (d *faultDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	d.mu.Lock()
	d.refreshes = append(d.refreshes, len(ls))
	d.refreshTimes = append(d.refreshTimes, time.Now())
	n := len(d.refreshes)
	errFn, hang, delay := d.refreshErr, d.hangRefresh, d.refreshDelay
	d.steps = append(d.steps, "refresh")
	d.mu.Unlock()
	defer d.log("refreshed")
	if hang {
		<-ctx.Done()
		errs := make([]error, len(ls))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
	if errFn != nil {
		if err := errFn(n); err != nil {
			errs := make([]error, len(ls))
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	}
	errs := d.Driver.Refresh(ctx, ls)
	time.Sleep(delay)
	return errs
}

func (d *faultDriver) Release(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	d.releaseValues = append(d.releaseValues, ctx.Value(traceKey{}))
	d.releaseCalls++
	hang, errFn, n := d.hangRelease, d.releaseErr, d.releaseCalls
	d.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if errFn != nil {
		if err := errFn(n); err != nil {
			return err
		}
	}
	return d.Driver.Release(ctx, l)
}

// notifyingDriver is a faultDriver that also offers Watch.
type notifyingDriver struct{ *faultDriver }

func (d notifyingDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if d.silentWatches {
		return make(chan struct{}), func() {}, nil
	}
	return d.Driver.(driver.Notifier).Watch(ctx, name)
}

func newFaulty(store *memlock.Store, notify bool) (*dlock.Locker, *faultDriver) {
	d := &faultDriver{Driver: store.Driver(), notify: notify}
	if notify {
		return dlock.NewLocker(notifyingDriver{d}, driver.LockerOptions{}), d
	}
	return dlock.NewLocker(d, driver.LockerOptions{}), d
}

func TestRenewalCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		const ttl = 3 * time.Second
		start := time.Now()
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		time.Sleep(10 * ttl)
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("lock lost while renewed: %v", context.Cause(k.Context()))
		}
		d.mu.Lock()
		times := append([]time.Time{start}, d.refreshTimes...)
		d.mu.Unlock()
		if len(times) < 30 {
			t.Fatalf("%d renewals in %v, want at least one per TTL/3", len(times)-1, 10*ttl)
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap > ttl/3 {
				t.Fatalf("renewal %d came %v after the previous, want at most TTL/3 = %v", i, gap, ttl/3)
			}
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
	})
}

func TestHungRenewalClosesDoneBeforeLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		d.hangRefresh = true
		const ttl = 10 * time.Second
		start := time.Now()
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		<-k.Done()
		lostAfter := time.Since(start)
		if lostAfter >= ttl || lostAfter < ttl/2 {
			t.Fatalf("Done closed %v after acquisition, want before the %v lease ends and after renewal had a chance", lostAfter, ttl)
		}
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Fatalf("context.Cause = %v, want ErrLost", cause)
		}
	})
}

func TestRenewalFindsLockGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		d.refreshErr = func(int) error { return driver.ErrNotHeld }
		const ttl = 9 * time.Second
		start := time.Now()
		k, _ := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		<-k.Done()
		if lostAfter := time.Since(start); lostAfter > ttl/3 {
			t.Fatalf("Done closed %v after acquisition, want at the first renewal (by TTL/3)", lostAfter)
		}
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Release = %v, want ErrNotHeld", err)
		}
	})
}

func TestTransientRenewalErrorIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		d.refreshErr = func(call int) error {
			if call <= 2 {
				return errors.New("connection reset")
			}
			return nil
		}
		const ttl = 3 * time.Second
		k, _ := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		time.Sleep(5 * ttl)
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("lock lost after two transient errors: %v", context.Cause(k.Context()))
		}
		k.Release(t.Context())
	})
}

func TestRenewalIsBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		const ttl, locks = 6 * time.Second, 50
		var held []*dlock.Lock
		for i := range locks {
			k, err := l.Acquire(t.Context(), string(rune('A'+i)), dlock.WithTTL(ttl))
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			held = append(held, k)
			time.Sleep(10 * time.Millisecond) // spread acquisitions a little
		}
		time.Sleep(2 * ttl)
		d.mu.Lock()
		calls, leases := len(d.refreshes), 0
		for _, n := range d.refreshes {
			leases += n
		}
		d.mu.Unlock()
		if leases < 4*locks {
			t.Fatalf("%d leases renewed in %v, want every lock renewed each TTL/3", leases, 2*ttl)
		}
		if calls > leases/10 {
			t.Fatalf("%d Refresh calls for %d lease renewals, want batches", calls, leases)
		}
		for _, k := range held {
			k.Release(t.Context())
		}
	})
}

func TestPollingWaiterIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder, _ := memlock.New(store)
		defer holder.Close()
		waiter, d := newFaulty(store, false) // no notifications: polling
		defer waiter.Close()
		const ttl = 10 * time.Second
		k, _ := holder.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		start := time.Now()
		k2, err := waiter.Acquire(t.Context(), "a")
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		waited := time.Since(start)
		d.mu.Lock()
		attempts := d.acquireCalls
		d.mu.Unlock()
		if waited < ttl || waited > ttl+driver.DefaultMaxRetryInterval {
			t.Fatalf("polling waiter acquired after %v, want right after the %v lease", waited, ttl)
		}
		if attempts > 25 {
			t.Fatalf("%d attempts over a %v wait, want a backoff (at most one per MaxRetryInterval once backed off)", attempts, ttl)
		}
		k.Release(t.Context())
		k2.Release(t.Context())
	})
}

func TestLostWakeUpFallsBackToRemainingLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder, _ := memlock.New(store)
		defer holder.Close()
		waiter, d := newFaulty(store, true)
		defer waiter.Close()
		d.silentWatches = true
		const ttl = 1500 * time.Millisecond
		k, _ := holder.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		start := time.Now()
		k2, err := waiter.Acquire(t.Context(), "a")
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if waited := time.Since(start); waited > ttl+10*time.Millisecond {
			t.Fatalf("waiter with a lost wake-up acquired after %v, want by the holder's %v lease", waited, ttl)
		}
		d.mu.Lock()
		attempts := d.acquireCalls
		d.mu.Unlock()
		if attempts > 4 {
			t.Fatalf("%d attempts, want the waiter to sleep until the lease ends", attempts)
		}
		k.Release(t.Context())
		k2.Release(t.Context())
	})
}

func TestAbandonedAcquireIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, d := newFaulty(store, true)
		hang := make(chan struct{})
		d.hangAcquire = hang
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := l.Acquire(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a hung driver = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("Acquire returned after %v, want at its 1s deadline", d)
		}
		close(hang) // the driver's step completes late, and takes the lock
		l.Close()   // waits for the late step and its release
		if owner, _, held := store.Holder("a"); held {
			t.Fatalf("lock held by %s after its acquirer gave up, want released", owner)
		}
	})
}

// lockerOver returns a Locker with default options over d.
func lockerOver(d driver.Driver) *dlock.Locker { return dlock.NewLocker(d, driver.LockerOptions{}) }

// Deadline is the moment Done closes unless the lease is renewed. The
// adversary trusts it: work that stops just before it still holds the
// lock, Done closes at it and not later, a renewal moves it, and a
// released or lost handle has none.
func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		const ttl = 10 * time.Second
		start := time.Now()
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if got, want := k.Deadline(), start.Add(ttl-ttl/10); !got.Equal(want) {
			t.Fatalf("Deadline = acquisition + %v, want + %v (TTL less a tenth)", got.Sub(start), want.Sub(start))
		}
		time.Sleep(time.Until(k.Deadline()) - time.Nanosecond)
		synctest.Wait()
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("Done closed before Deadline: %v", context.Cause(k.Context()))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !testkit.IsClosed(k.Done()) {
			t.Fatal("Done still open at Deadline without a renewal")
		}
		if d := k.Deadline(); !d.IsZero() {
			t.Errorf("Deadline of a lost lock = %v, want the zero Time", d)
		}

		r, err := l.Acquire(t.Context(), "b", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		first := r.Deadline()
		time.Sleep(ttl / 2) // past the first renewal, at TTL/3
		synctest.Wait()
		if got := r.Deadline(); !got.After(first) || got.After(time.Now().Add(ttl)) {
			t.Errorf("Deadline after a renewal = first + %v, want later than first and within a TTL of now", got.Sub(first))
		}
		testkit.MustRelease(t, r)
		if d := r.Deadline(); !d.IsZero() {
			t.Errorf("Deadline of a released handle = %v, want the zero Time", d)
		}
	})
}

// TestOneAttemptPerRelease: the adversary is a herd. Fifty Acquire calls
// of one Locker wait on a name; each release used to make all fifty try
// (a round trip each, and on SQL stores a connection each: 172× the
// handoff time at 1,000 waiters on MariaDB). A release now makes one of
// them try, the oldest, whether the release came from another Locker
// (the store's notification) or from this one.
func TestOneAttemptPerRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		other, _ := memlock.New(store)
		defer other.Close()
		l, d := newFaulty(store, true)
		defer l.Close()
		calls := func() int {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.acquireCalls
		}
		k := testkit.MustTryAcquire(t, other, "a")
		const n = 50
		type taken struct {
			i   int
			k   *dlock.Lock
			err error
		}
		got := make(chan taken, n)
		for i := range n {
			go func() {
				k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(time.Hour))
				got <- taken{i, k, err}
			}()
			synctest.Wait() // queued in this order
		}
		for i := range n {
			before := calls()
			testkit.MustRelease(t, k)
			synctest.Wait()
			r := <-got
			if r.err != nil || r.i != i {
				t.Fatalf("release %d: waiter %d took it (error %v), want waiter %d: arrival order", i, r.i, r.err, i)
			}
			if c := calls() - before; c != 1 {
				t.Fatalf("release %d: %d attempts by this Locker's %d waiters, want 1", i, c, n-i)
			}
			k = r.k
		}
		testkit.MustRelease(t, k)
	})
}

// TestFrontWaiterLeaves: the adversary cancels the one waiter a release
// would wake (the oldest), and closes the store's notifications: the
// next waiter must become the front and be woken by the release, by the
// store's notification or this Locker's own release alike.
func TestFrontWaiterLeaves(t *testing.T) {
	for _, notify := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			store := memlock.NewStore()
			l, _ := newFaulty(store, notify)
			defer l.Close()
			k := testkit.MustTryAcquire(t, l, "a")
			ctx, cancel := context.WithCancel(t.Context())
			front := make(chan error, 1)
			go func() {
				_, err := l.Acquire(ctx, "a", dlock.WithTTL(time.Hour))
				front <- err
			}()
			synctest.Wait()
			next := make(chan *dlock.Lock, 1)
			go func() {
				k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(time.Hour))
				if err != nil {
					t.Errorf("second waiter: Acquire = %v", err)
				}
				next <- k
			}()
			synctest.Wait()
			cancel()
			if err := <-front; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled front waiter: Acquire = %v, want context.Canceled", err)
			}
			synctest.Wait()
			released := time.Now()
			testkit.MustRelease(t, k)
			k2 := <-next
			if d := time.Since(released); d != 0 {
				t.Errorf("notify=%v: the second waiter took the name %v after the release, want at once (woken)", notify, d)
			}
			testkit.MustRelease(t, k2)
		})
	}
}
