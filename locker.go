package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Locker hands out Locks on one store. It is safe for concurrent use. Each
// Locker is a distinct owner identity: two Lockers on the same store
// exclude each other exactly like two processes do.
//
// A Locker runs one background goroutine that renews all its held locks in
// batches and closes the Done channel of any lock whose lease could not be
// renewed in time. Close stops it.
type Locker struct {
	drv      driver.Driver
	notifier driver.Notifier // nil when the driver cannot wake waiters
	queuer   driver.Queuer   // nil when the store does not queue waiters
	inline   bool            // the driver honours ctx: call it in the caller's goroutine
	cfg      Config
	id       string
	seq      atomic.Uint64

	closingCtx context.Context         // done once Close begins
	closeNow   context.CancelCauseFunc // begins Close (cause ErrClosed): wakes waiters, stops the keeper
	closing    <-chan struct{}         // closingCtx.Done()
	bg         sync.WaitGroup
	work       chan func() // hands work to idle worker goroutines (see goBackground)

	mu          sync.Mutex
	keeperTimer *time.Timer // fires when the keeper has work (see schedule)
	keeperAt    time.Time   // when keeperTimer fires
	closed      bool
	held        map[*held]struct{}                    // every active acquisition
	waiters     map[string]map[chan struct{}]struct{} // local waiters by name
}

// New returns a Locker over drv. Backend packages call it; applications
// use the backend's constructor (redislock.New, memlock.New, ...). A nil
// cfg means defaults.
func New(drv driver.Driver, cfg *Config) *Locker {
	l := &Locker{
		drv:         drv,
		cfg:         cfg.withDefaults(),
		id:          newLockerID(),
		keeperTimer: time.NewTimer(time.Hour),
		keeperAt:    time.Now().Add(time.Hour),
		held:        make(map[*held]struct{}),
		waiters:     make(map[string]map[chan struct{}]struct{}),
		work:        make(chan func()),
	}
	l.closingCtx, l.closeNow = context.WithCancelCause(context.Background())
	l.closing = l.closingCtx.Done()
	l.notifier, _ = drv.(driver.Notifier)
	l.queuer, _ = drv.(driver.Queuer)
	if h, ok := drv.(driver.ContextHonourer); ok {
		l.inline = h.HonoursContext()
	}
	l.bg.Add(1)
	go l.keep() // exits when closing is closed
	return l
}

// TryAcquire makes one attempt to take name. If another owner holds it,
// the error wraps ErrNotAcquired. If ctx carries a Lock of this Locker
// holding name (see Lock.Context), it re-enters instead.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, opts, false)
}

// Acquire takes name, waiting until it is free or ctx is done. A waiter is
// woken as soon as the store reports the name freed, and otherwise tries
// again no later than the holder's remaining lease (bounded by
// Config.MaxRetryInterval). If ctx ends first the error wraps ctx.Err() and
// nothing of the wait is left behind. If ctx carries a Lock of this Locker
// holding name (see Lock.Context), it re-enters instead.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, opts, true)
}

func (l *Locker) acquire(ctx context.Context, name string, opts []Option, wait bool) (*Lock, error) {
	if ctx == nil {
		return nil, fmt.Errorf("dlock: acquire %s: nil context: %w", quote(name), ErrInvalid)
	}
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("dlock: acquire: %w", err)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), err)
	}
	own := ownerFrom(ctx, l)
	if k, err := l.reenter(own, name); k != nil || err != nil {
		return k, err
	}
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), context.Cause(ctx))
	}

	lease := driver.Lease{Name: name, Owner: l.ownerString(), TTL: o.ttl, Metadata: o.metadata}
	if wait && l.queuer != nil {
		return l.acquireQueued(ctx, own, lease, !o.noRenew)
	}
	var (
		wake     <-chan struct{}
		local    chan struct{}
		delay    time.Duration
		attempts int
	)
	for {
		start := time.Now()
		res, err := call(l, ctx, func() (driver.Result, error) { return l.drv.Acquire(ctx, lease) }, l.abandonLate(lease))
		if err != nil {
			l.abandon(lease)
			return nil, l.acquireError(ctx, name, err)
		}
		if res.Acquired {
			return l.register(own, lease, res.Fence, start, !o.noRenew)
		}
		if !wait {
			return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), ErrNotAcquired)
		}
		if local == nil {
			// Subscribe before the next attempt, so that a release
			// between that attempt and the wait is not missed.
			local = l.addWaiter(name)
			defer l.removeWaiter(name, local)
			if l.notifier != nil {
				w, stop, err := l.notifier.Watch(ctx, name)
				if err == nil {
					wake = w
					defer stop()
				} else if ctx.Err() != nil {
					return nil, l.acquireError(ctx, name, err)
				}
				// Any other error: wait without notifications.
			}
			continue
		}
		var sleep time.Duration
		delay, sleep = l.nextDelay(delay, res.Remaining, wake != nil)
		attempts++
		t := time.NewTimer(sleep)
		select {
		case <-wake:
		case <-local:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dlock: acquire %s: gave up after %d attempts: %w", quote(name), attempts, context.Cause(ctx))
		case <-l.closing:
			t.Stop()
			return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), ErrClosed)
		}
		t.Stop()
	}
}

// acquireQueued waits in the store's own fair queue.
func (l *Locker) acquireQueued(ctx context.Context, own *owner, lease driver.Lease, renew bool) (*Lock, error) {
	var (
		res driver.Result
		err error
	)
	if ctx.Done() == nil {
		// Only Close can end this wait: run the step inline (no goroutine
		// hop) with a context that Close cancels.
		ctx = closedBy{l.closingCtx, ctx}
		res, err = l.queuer.AcquireQueued(ctx, lease)
	} else {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(l.closingCtx, func() { cancel(ErrClosed) })
		defer stop()
		res, err = callGrace(l, ctx, queueLeaveGrace, func() (driver.Result, error) { return l.queuer.AcquireQueued(ctx, lease) }, l.abandonLate(lease))
	}
	start := res.LeaseStart
	if start.IsZero() {
		start = time.Now() // Queuer promises the lease lasts TTL from its return
	}
	if err == nil && !res.Acquired {
		err = errors.New("driver returned from its queue without the lock")
	}
	if err != nil {
		l.abandon(lease)
		return nil, l.acquireError(ctx, lease.Name, err)
	}
	return l.register(own, lease, res.Fence, start, renew)
}

// closedBy is a context that ends when the Locker closes and carries the
// values of the caller's context, which cannot end.
type closedBy struct {
	context.Context // the Locker's closingCtx
	values          context.Context
}

// Value answers from the Locker's context first, so that the context
// package sees closedBy as a child of it (no watcher goroutine for
// contexts derived from it, and context.Cause is ErrClosed), and from the
// caller's context for everything else.
func (c closedBy) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

func (l *Locker) acquireError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			return fmt.Errorf("dlock: acquire %s: %w: %w", quote(name), cause, err)
		}
	}
	return fmt.Errorf("dlock: acquire %s: %w", quote(name), err)
}

// nextDelay returns the backoff state after prev and how long a waiter
// sleeps before its next attempt when nothing wakes it. With notifications
// it waits for the holder's lease to run out; without, it backs off
// exponentially (with jitter on the sleep, not on the state). Both are
// bounded by MaxRetryInterval and the holder's remaining lease.
func (l *Locker) nextDelay(prev, remaining time.Duration, notified bool) (next, sleep time.Duration) {
	switch {
	case notified && remaining > 0:
		next = remaining + time.Millisecond
	case notified:
		next = l.cfg.MaxRetryInterval
	case prev == 0:
		next = l.cfg.MinRetryInterval
	default:
		next = 2 * prev
	}
	next = min(next, l.cfg.MaxRetryInterval)
	sleep = next
	if !notified {
		sleep = jitter(sleep)
	}
	if remaining > 0 {
		sleep = min(sleep, remaining+time.Millisecond)
	}
	return next, sleep
}

// abandon frees, in the background, a lease whose Acquire reply was lost
// (cancelled or failed mid-flight), in case the server took it anyway. The
// owner string is unique to this attempt, so this never frees another
// owner's lock.
func (l *Locker) abandon(lease driver.Lease) {
	l.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		l.drv.Release(ctx, lease)
	})
}

// abandonLate is call's late handler for Acquire: it frees what a step
// that completed after its caller gave up may have taken.
func (l *Locker) abandonLate(lease driver.Lease) func(driver.Result, error) {
	return func(res driver.Result, err error) {
		if res.Acquired || err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			l.drv.Release(ctx, lease)
		}
	}
}

const cleanupTimeout = 5 * time.Second

// queueLeaveGrace is how long a cancelled queued Acquire waits for the
// driver to take its entry out of the store's queue before returning.
const queueLeaveGrace = time.Second

// register records a new acquisition and returns its first handle.
func (l *Locker) register(own *owner, lease driver.Lease, fence uint64, start time.Time, renew bool) (*Lock, error) {
	h := newHeld(l, lease, fence, start, renew)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.abandon(lease)
		return nil, fmt.Errorf("dlock: acquire %s: %w", quote(lease.Name), ErrClosed)
	}
	if own == nil {
		own = &owner{l: l, names: make(map[string]*held)}
	}
	h.owner = own
	own.names[lease.Name] = h
	l.held[h] = struct{}{}
	k := h.newHandle()
	l.schedule(h.nextEvent())
	l.mu.Unlock()
	return k, nil
}

// reenter returns a new handle on the acquisition of name that own holds,
// or nil if it holds none.
func (l *Locker) reenter(own *owner, name string) (*Lock, error) {
	if own == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), ErrClosed)
	}
	h := own.names[name]
	if h == nil || h.state != active {
		return nil, nil
	}
	return h.newHandle(), nil
}

// Close stops the Locker's background work, releases every lock it holds
// (their Context's cause becomes ErrClosed), makes waiting Acquire calls
// return ErrClosed, and closes the driver. Later calls return ErrClosed.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("dlock: close: %w", ErrClosed)
	}
	l.closed = true
	var all []*held
	for h := range l.held {
		all = append(all, h)
		l.forget(h, closed)
	}
	l.mu.Unlock()
	l.closeNow(ErrClosed)

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, h := range all {
		h.cancel(ErrClosed)
		if err := l.drv.Release(ctx, h.lease); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			errs = append(errs, fmt.Errorf("release %s: %w", quote(h.lease.Name), err))
		}
	}
	l.bg.Wait()
	if err := l.drv.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dlock: close: %w", err)
	}
	return nil
}

// forget removes h from the Locker's books and sets its final state.
// Called with l.mu held.
func (l *Locker) forget(h *held, s state) {
	if h.state != active {
		return
	}
	h.state = s
	delete(l.held, h)
	if h.owner.names[h.lease.Name] == h {
		delete(h.owner.names, h.lease.Name)
	}
}

// addWaiter registers a local waiter on name, woken when this Locker
// releases or loses name.
func (l *Locker) addWaiter(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.waiters[name]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		l.waiters[name] = m
	}
	m[ch] = struct{}{}
	return ch
}

func (l *Locker) removeWaiter(name string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[name], ch)
	if len(l.waiters[name]) == 0 {
		delete(l.waiters, name)
	}
}

// wakeLocal wakes this Locker's waiters on name.
func (l *Locker) wakeLocal(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeLocalLocked(name)
}

func (l *Locker) wakeLocalLocked(name string) {
	for ch := range l.waiters[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
