package dlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/lockmode"
)

// TryAcquire makes one attempt to take name. If another owner holds it,
// the error wraps ErrNotAcquired. If ctx carries a Lock of this Locker
// holding name (see Lock.Context), it re-enters instead.
//
// On a backend whose leases run on the store's wall clock (its package
// documentation says so), TryAcquire also fails while the store's clock
// says the holder's lease ended less than the backend's clock bound ago
// (a forward step of that clock may have ended it early, and one attempt
// cannot tell, see Acquire), unless earlier TryAcquire calls of this
// Locker on name saw the holder's state unchanged for the holder's TTL:
// a caller that tries a name again and again (a scheduler's tick) takes
// a crashed holder's name over as a waiter would.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, opts, false)
}

// Acquire takes name, waiting until it is free or ctx is done. A waiter is
// woken as soon as the store reports the name freed, and otherwise tries
// again no later than the holder's remaining lease (bounded by the
// backend's longest retry interval). If ctx ends first the error wraps
// ctx.Err() and context.Cause(ctx), and nothing of the wait is left
// behind.
//
// The Acquire calls of one Locker waiting on a name queue in arrival
// order, and a release wakes only the oldest (which, taking a shared
// hold or a permit, wakes the next): a release costs each Locker one
// attempt, however many of its calls wait. The store decides between
// Lockers.
//
// If ctx carries a Lock of this Locker holding name (see Lock.Context),
// Acquire re-enters it instead: the new handle shares the acquisition's
// lease and fencing token. Re-entering keeps the acquisition's TTL,
// renewal and metadata; the options of the re-entering call are checked
// (bad ones are an error) and otherwise ignored.
//
// On a store whose leases run on its wall clock, a lease that clock says
// ended less than the backend's clock bound ago is not taken at once: a
// waiter takes it once it has seen the holder's state unchanged for the
// holder's TTL on its own monotonic clock, or when the store's clock says
// it ended more than the bound ago, whichever comes first. A step of the
// store's clock within the bound thus never ends a lease under its
// holder.
//
// The handle Acquire returns always has time left and the token the store
// holds: if the store answered so late that more than half the lease may
// have passed, Acquire checks with a refresh that checks owner and token
// before handing it out, and if the token is no longer the one the store
// holds for this acquisition (a late grant that lapsed before the store
// granted the name to it again), it asks the store for the current one.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, opts, true)
}

func (l *Locker) acquire(ctx context.Context, name string, opts []Option, wait bool) (*Lock, error) {
	if ctx == nil {
		return nil, errorf("dlock: acquire %s: nil context: %w", quote(name), ErrInvalid)
	}
	if err := driver.ValidateName(name); err != nil {
		return nil, errorf("dlock: acquire: %w", err)
	}
	a := &attempt{ctx: ctx}
	o := &a.opts
	if err := o.build(opts); err != nil {
		return nil, errorf("dlock: acquire %s: %w", quote(name), err)
	}
	if (o.shared || o.limit > 0) && !l.multi {
		return nil, errorf("dlock: acquire %s %s: the backend has no shared locks or semaphores: %w", lockmode.String(o.shared, o.limit), quote(name), ErrUnsupported)
	}
	if o.delay > 0 && !l.delays {
		return nil, errorf("dlock: acquire %s: the %s backend cannot keep a name past its holder's lease (WithLockDelay): %w", quote(name), l.backend, ErrUnsupported)
	}
	a.own = ownerFrom(ctx, l)
	if k, err := l.reenter(ctx, a.own, name, o); k != nil || err != nil {
		return k, err
	}
	if err := l.begin(); err != nil {
		return nil, errorf("dlock: acquire %s: %w", quote(name), err)
	}
	defer l.acquiring.Done()
	if ctx.Err() != nil {
		return nil, errorf("dlock: acquire %s: %w", quote(name), ctxErr(ctx))
	}
	a.renew = !o.noRenew
	a.lease = driver.Lease{Name: name, Owner: l.ownerString(), TTL: o.ttl, Metadata: o.metadata, Shared: o.shared, Limit: o.limit, Delay: o.delay}
	if hs := l.hooks.Load(); hs != nil {
		return l.acquireHooked(*hs, a, wait)
	}
	return l.acquireOn(a, wait)
}

// acquireOn runs an acquisition that is not a re-entry.
func (l *Locker) acquireOn(a *attempt, wait bool) (*Lock, error) {
	if wait && l.queuer != nil {
		return l.acquireQueued(a)
	}
	a.lease.Waiting = wait
	return l.acquireLoop(a, wait)
}

// attempt is one Acquire or TryAcquire call. It embeds the acquisition
// that register records if the call succeeds (and its options, and the
// context of a wait that only Close ends), so that a call allocates one
// object for all of them.
type attempt struct {
	held                       // lease and renew set before the first step
	ctx        context.Context // the caller's; its values go to the Lock's Context
	own        *owner          // nil: a new owner
	opts       acquireOptions  // the call's options
	untilClose closedBy        // see acquireQueued
	queued     bool            // a step left a writer's intent in the store (see acquireLoop)

	// For hooks.
	contended bool  // a step found the name held by another owner
	ahead     int16 // entries ahead in the store's queue (capped), -1 if unknown
	attempts  int32 // steps on the store
}

// acquireLoop tries to take a.lease, and if wait is set waits between
// attempts for a wake-up: a store notification, a release in this Locker,
// or the holder's remaining lease running out. A waiter applies the
// takeover rule of driver.Result.Stamp: once it has seen the same Stamp
// for its StampTTL on its own clock, its next attempt carries it as
// Lease.Takeover.
func (l *Locker) acquireLoop(a *attempt, wait bool) (*Lock, error) {
	k, err := l.attemptLoop(a, wait)
	if k == nil && a.queued {
		// The store keeps this writer's intent: take it out, since the
		// wait ended without the lock.
		l.abandon(a.lease)
	}
	return k, err
}

// attemptLoop is acquireLoop's loop: attempt, and while the name is held
// and wait is set, wait for a wake-up and attempt again.
func (l *Locker) attemptLoop(a *attempt, wait bool) (k *Lock, err error) {
	name := a.lease.Name
	if !wait {
		// A single attempt takes over a holder in doubt only if earlier
		// attempts of this Locker saw its stamp unchanged for long enough.
		a.lease.Takeover = l.stamps.takeover(name, time.Now())
	}
	var w waitState
	defer func() { l.endWait(name, &w, k != nil && !a.lease.Shared && a.lease.Limit == 0) }()
	for {
		if wait {
			if err := l.yield(a); err != nil {
				return nil, err
			}
		}
		res, sent, k, err := l.attemptOnce(a, wait)
		if k != nil || err != nil {
			return k, err
		}
		a.contended = true
		if wait {
			l.noteContended(name, time.Now())
		}
		a.queued = a.queued || res.Queued
		if !wait {
			l.stamps.note(name, res, time.Now())
			return nil, errorf("dlock: acquire %s: %w", quote(name), ErrNotAcquired)
		}
		takeover, until := w.obs.Note(res, time.Now())
		a.lease.Takeover = takeover
		switch {
		case w.me == nil:
			// Queue (and, first in the queue, subscribe) before the next
			// attempt, so that a release between that attempt and the
			// wait is not missed.
			if err := l.startWait(a.ctx, name, &w); err != nil {
				return nil, err
			}
		case takeover != "" && takeover != sent:
			// The holders the stamp names have given up by now: attempt
			// at once. (If the same takeover was just refused, the wait
			// goes on as usual.)
		default:
			if err := l.pause(a, &w, res.Remaining, until); err != nil {
				return nil, err
			}
		}
	}
}

// waitState is what attemptLoop keeps between the attempts of one wait.
type waitState struct {
	me    *waiter         // in the Locker's queue for the name; nil until startWait
	delay time.Duration   // backoff state (see nextDelay)
	obs   driver.Observer // the takeover rule, for this wait only
}

// attemptOnce makes one attempt to take a.lease. It returns the new handle
// if the attempt took the name, an error if it failed (after freeing what
// it may have taken), and otherwise the store's answer and the Takeover the
// attempt carried.
func (l *Locker) attemptOnce(a *attempt, wait bool) (res driver.Result, sent string, k *Lock, err error) {
	ctx := a.ctx
	start := time.Now()
	a.attempts++
	res, err = acquireOne(l, ctx, a.lease)
	sent = a.lease.Takeover
	a.lease.Takeover = "" // good for one attempt; never kept in a registered lease
	if err == nil && res.Acquired {
		var fence uint64
		fence, start, err = l.confirm(ctx, a.lease, res.Fence, start)
		if err == nil {
			if !wait {
				l.stamps.note(a.lease.Name, res, start)
			}
			k, err = l.register(a, fence, start)
			return res, sent, k, err
		}
		if errors.Is(err, driver.ErrNotHeld) {
			// The lease ran out before we could use it: not acquired.
			res, err = driver.Result{}, nil
		}
	}
	if err != nil {
		l.abandon(a.lease)
		if ctx.Err() != nil {
			l.releaseLater(a.lease) // the request may still be on its way
		}
		return res, sent, nil, l.acquireError(ctx, a.lease, err)
	}
	return res, sent, nil, nil
}

// startWait queues a waiter on name in this Locker (see localWaiters);
// the front of the queue also subscribes to the store's notifications.
// The error says ctx ended while subscribing.
func (l *Locker) startWait(ctx context.Context, name string, w *waitState) error {
	me, front := l.joinWait(name)
	w.me = me
	if front {
		return l.subscribe(ctx, name, me)
	}
	return nil
}

// subscribe makes the front waiter me's subscription to the store's
// notifications for name, where the store can notify. The error says ctx
// ended while subscribing; any other failure of the subscription leaves
// the waiters of name without notifications (they fall back to retries).
func (l *Locker) subscribe(ctx context.Context, name string, me *waiter) error {
	if l.notifier == nil {
		return nil
	}
	wake, stop, err := l.notifier.Watch(ctx, name)
	err = l.storeError(err)
	switch {
	case err == nil:
		l.setSubscription(me, subscription{wake: wake, stop: stop})
	case ctx.Err() != nil:
		return l.acquireError(ctx, driver.Lease{Name: name}, err)
	default:
		l.setSubscription(me, subscription{})
	}
	return nil
}

// endWait takes the waiter startWait queued, if it ran, out of the queue,
// handing its turn and subscription to the next (see leaveWait).
func (l *Locker) endWait(name string, w *waitState, tookExclusive bool) {
	if w.me != nil {
		l.leaveWait(name, w.me, tookExclusive)
	}
}

// pause waits until a waiter should attempt again. The front of the
// name's queue waits for a wake-up (frontPause); the others wait for
// their turn, and attempt on their own only to keep a writer's intent
// alive. The error says ctx ended or the Locker closed.
func (l *Locker) pause(a *attempt, w *waitState, remaining, until time.Duration) error {
	name := a.lease.Name
	for {
		front, attempt, sub, tried := l.turn(name, w.me)
		switch {
		case front && !tried && l.notifier != nil:
			// Became the front with no subscription (the one before had
			// none): subscribe, then attempt, so that a release after
			// the subscription is not missed.
			return l.subscribe(a.ctx, name, w.me)
		case front && attempt:
			return nil
		case front:
			if rung, err := l.frontPause(a, w, sub.wake, remaining, until); !rung || err != nil {
				return err
			}
			continue // rung: look at the turn, which says to attempt
		}
		if again, err := l.awaitTurn(a, w); again || err != nil {
			return err
		}
	}
}

// awaitTurn waits until a waiter behind the front of its queue is rung
// (it returns false, nil: look at the turn again), or, if it keeps a
// writer's intent in the store, until that intent needs an attempt to
// stay alive (true, nil).
func (l *Locker) awaitTurn(a *attempt, w *waitState) (attempt bool, err error) {
	var intent <-chan time.Time
	if a.queued {
		t := time.NewTimer(a.lease.TTL / 3) // the intent lasts a TTL
		defer t.Stop()
		intent = t.C
	}
	select {
	case <-w.me.bell:
		return false, nil
	case <-intent:
		return true, nil
	case <-a.ctx.Done():
		return false, gaveUp(a)
	case <-l.closing:
		return false, errorf("dlock: acquire %s: %w", quote(a.lease.Name), ErrClosed)
	}
}

// frontPause waits for a wake-up before the front waiter's next attempt:
// a store notification, a release in this Locker, or the sleep nextDelay
// gives, shortened while a writer's intent must be kept alive and when a
// takeover is due (until). It reports whether the waiter's bell rang.
func (l *Locker) frontPause(a *attempt, w *waitState, wake <-chan struct{}, remaining, until time.Duration) (rung bool, err error) {
	var sleep time.Duration
	w.delay, sleep = l.nextDelay(w.delay, remaining, wake != nil)
	if a.queued {
		sleep = min(sleep, a.lease.TTL/3) // the intent lasts a TTL
	}
	if until > 0 {
		sleep = min(sleep, until) // try again when a takeover is due
	}
	t := time.NewTimer(sleep)
	defer t.Stop()
	select {
	case <-wake:
	case <-w.me.bell:
		return true, nil
	case <-t.C:
	case <-a.ctx.Done():
		return false, gaveUp(a)
	case <-l.closing:
		return false, errorf("dlock: acquire %s: %w", quote(a.lease.Name), ErrClosed)
	}
	return false, nil
}

// gaveUp is the error of a wait whose ctx ended.
func gaveUp(a *attempt) error {
	return errorf("dlock: acquire %s: gave up after %d attempts: %w", quote(a.lease.Name), a.attempts, ctxErr(a.ctx))
}

// nextDelay returns the backoff state after prev and how long a waiter
// sleeps before its next attempt when nothing wakes it. With notifications
// it waits for the holder's lease to run out; without, it backs off
// exponentially (with jitter on the sleep, not on the state). Both are
// bounded by the Locker's longest retry interval and the holder's
// remaining lease.
func (l *Locker) nextDelay(prev, remaining time.Duration, notified bool) (next, sleep time.Duration) {
	switch {
	case notified && remaining > 0:
		next = remaining + time.Millisecond
	case notified:
		next = l.maxRetry
	case prev == 0:
		next = l.minRetry
	default:
		next = 2 * prev
	}
	next = min(next, l.maxRetry)
	sleep = next
	if !notified {
		sleep = jitter(sleep)
	}
	if remaining > 0 {
		sleep = min(sleep, remaining+time.Millisecond)
	}
	return next, sleep
}

// jitter returns a random duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// acquireQueued waits in the store's own fair queue.
func (l *Locker) acquireQueued(a *attempt) (*Lock, error) {
	var (
		res driver.Result
		err error
		ctx = a.ctx
	)
	if ctx.Done() == nil {
		// Only Close can end this wait: run the step inline (no goroutine
		// hop) with a context that Close cancels.
		a.untilClose = closedBy{l.closingCtx, ctx}
		ctx = &a.untilClose
		res, err = l.queuer.AcquireQueued(ctx, a.lease)
	} else {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(l.closingCtx, func() { cancel(ErrClosed) })
		defer stop()
		res, err = callGrace(l, ctx, driver.QueueLeaveTimeout, func() (driver.Result, error) { return l.queuer.AcquireQueued(ctx, a.lease) }, l.abandonLate(a.lease))
	}
	err = l.storeError(err)
	a.attempts = 1
	if res.Acquired {
		a.contended = res.Waited
		a.ahead = int16(min(res.Ahead, math.MaxInt16))
	} else {
		a.contended = err != nil && ctx.Err() != nil // it gave up waiting
	}
	start := res.LeaseStart
	if start.IsZero() {
		start = time.Now() // Queuer promises the lease lasts TTL from its return
	}
	if err == nil && !res.Acquired {
		err = errors.New("driver returned from its queue without the lock")
	}
	fence := res.Fence
	if err == nil {
		fence, start, err = l.confirm(ctx, a.lease, fence, start)
	}
	if err != nil {
		l.abandon(a.lease)
		return nil, l.acquireError(ctx, a.lease, err)
	}
	return l.register(a, fence, start)
}

// closedBy is a context that ends with its Context (the Locker's
// closingCtx, or a deadline shared by cleanup steps) and carries the
// values of the caller's context, which cannot end.
type closedBy struct {
	context.Context // closingCtx, or a sharedDeadline's
	values          context.Context
}

// Value answers from the ending context first, so that the context
// package sees closedBy as a child of it (no watcher goroutine for
// contexts derived from it, and context.Cause is the ending context's),
// and from the caller's context for everything else.
func (c closedBy) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// acquireOne runs one driver Acquire of lease, releasing what it took if
// ctx ends before it answers.
func acquireOne(l *Locker, ctx context.Context, lease driver.Lease) (driver.Result, error) {
	if l.direct(ctx) {
		res, err := l.drv.Acquire(ctx, lease)
		return res, l.storeError(err)
	}
	res, err := call(l, ctx, func() (driver.Result, error) { return l.drv.Acquire(ctx, lease) }, l.abandonLate(lease))
	return res, l.storeError(err)
}

// confirm makes sure a handle is never handed out with its lease nearly or
// already gone, nor with a token the store no longer holds: if more than
// half the TTL has passed since start (the send time of the step that
// took the lease), it renews the lease with a refresh that checks owner
// and token (Lease.Fence), and returns that refresh's send time instead.
//
// A slow reply may carry a grant that lapsed unused while the store
// granted the same owner the name again with a new token (a queued
// waiter's grant, handed on twice). The refresh then fails with
// driver.ErrNotHeld, and confirm asks the store which token stands with
// one Acquire of the same lease: an owner-checked re-entry that returns
// the token the store holds, or, if the name is free, a new one. Either
// stands, and confirm goes on with it (checking again if that step was
// slow too). The fence confirm returns is thus the token the store held
// for this owner when its last step was sent. The error wraps
// driver.ErrNotHeld and ErrNotHeld if another owner holds the name.
func (l *Locker) confirm(ctx context.Context, lease driver.Lease, fence uint64, start time.Time) (uint64, time.Time, error) {
	lease.Takeover, lease.Waiting = "", false // leave no intent behind
	for range confirmAttempts {
		if time.Since(start) < lease.TTL/2 {
			return fence, start, nil
		}
		lease.Fence = fence
		start = time.Now()
		err := refreshOne(l, ctx, lease)
		if err == nil {
			continue // checks the time the refresh took
		}
		if !errors.Is(err, driver.ErrNotHeld) {
			return fence, start, fmt.Errorf("the store answered after more than half the lease of %v, and the check that followed failed: %w", lease.TTL, err)
		}
		lease.Fence = 0
		start = time.Now()
		res, aerr := acquireOne(l, ctx, lease)
		switch {
		case aerr != nil:
			return fence, start, fmt.Errorf("the store answered after more than half the lease of %v with a token it no longer holds (%v), and asking it for the current one failed: %w", lease.TTL, err, aerr)
		case !res.Acquired:
			return fence, start, fmt.Errorf("the store answered after more than half the lease of %v, and another owner holds the name now: %w: %w", lease.TTL, ErrNotHeld, err)
		}
		fence = res.Fence
	}
	return fence, start, fmt.Errorf("the store took more than half the lease of %v to answer, %d times: %w", lease.TTL, confirmAttempts, errSlowStore)
}

// confirmAttempts bounds the refreshes confirm makes.
const confirmAttempts = 3

var errSlowStore = errors.New("store too slow for this TTL")

// register records a new acquisition and returns its first handle. If the
// Locker closed meanwhile it releases the lease before returning
// ErrClosed.
func (l *Locker) register(a *attempt, fence uint64, start time.Time) (*Lock, error) {
	h := &a.held
	own := a.own
	if own == nil {
		own = &h.newOwner
		own.l = l
	}
	h.init(l, a.ctx, own, fence, start)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.abandon(a.lease)
		return nil, errorf("dlock: acquire %s: %w", quote(a.lease.Name), ErrClosed)
	}
	own.put(h)
	l.track(h)
	k := h.newHandle()
	l.mu.Unlock()
	return k, nil
}

// acquireError returns the error of an acquisition of lease whose step
// failed with err. It names the name and the mode once, and wraps err
// and the sentinels that apply: ErrInvalid for a name held in another
// mode, ctx's error if ctx ended.
func (l *Locker) acquireError(ctx context.Context, lease driver.Lease, err error) error {
	name := quote(lease.Name)
	if errors.Is(err, driver.ErrMode) {
		msg := fmt.Sprintf("dlock: acquire %s as %s: %s (a lock is exclusive or shared; a semaphore's holders all give the same limit)",
			name, lockmode.String(lease.Shared, lease.Limit), modeDetail(err))
		return said(msg, ErrInvalid, err)
	}
	if ctx.Err() != nil && (!errors.Is(err, ctx.Err()) || !errors.Is(err, context.Cause(ctx))) {
		cerr := ctxErr(ctx)
		msg := fmt.Sprintf("dlock: acquire %s: %v: %s", name, cerr, withoutPrefix(err.Error(), name))
		return said(msg, cerr, err)
	}
	return said(fmt.Sprintf("dlock: acquire %s: %s", name, withoutPrefix(err.Error(), name)), err)
}
