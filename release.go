package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Release releases this handle. Releasing the last handle of an
// acquisition frees the name on the server, with one owner-checked atomic
// step that never frees another owner's lock, and wakes waiters. The error
// wraps ErrNotHeld if this handle was released already or the lock had
// been lost, and ErrClosed if the Locker's Close released it. If the
// store cannot be reached or fails the step, the error says so, and the
// Locker keeps trying in the background (backing off from 100 ms to 2 s,
// with jitter) until the store frees the name, says the lease is gone, or
// the lease could have run out by itself; so a transient error does not
// leave the name held for the rest of its TTL. Close stops those tries.
//
// Release frees the name even when ctx has ended, as in the common
// "defer lock.Release(ctx)" after a request was cancelled: the server
// step runs with ctx's values but not its cancellation, bounded by a few
// seconds. If ctx had ended before the call, Release waits for that step
// and returns its outcome (nil when the name was freed): a cancelled
// request's deferred Release reports an error only when the release
// failed. If ctx ends while the step is under way, Release returns at
// once with an error wrapping ctx.Err(), and the step goes on in the
// background (Close waits for it).
func (k *Lock) Release(ctx context.Context) error {
	h, l := k.h, k.h.l
	l.mu.Lock()
	done, st := k.done, h.state
	if !done {
		k.done = true
		h.dropHandle(k)
		k.endWarnings()
	}
	last := !done && len(h.handles) == 0
	if last && st == active {
		l.forget(h, released)
	}
	until := h.deadline.Add(lossMargin(h.lease.TTL)) // the server's lease cannot end before
	l.mu.Unlock()
	k.cancel(ErrReleased)
	if err := k.stateError("release", done, st); err != nil {
		if last && st == lost && h.lease.Delay == 0 {
			// The lease may still be ours on the server; free it early.
			// The owner check makes this safe whatever happened since.
			l.abandon(h.lease)
		}
		return err
	}
	if !last {
		return nil
	}
	var start time.Time
	hs := l.hooks.Load()
	if hs != nil {
		start = time.Now()
	}
	front := l.waitFront(h.lease.Name)
	var stepStart time.Time
	yielding := l.yields.n.Load() > 0
	if yielding {
		stepStart = time.Now()
	}
	err, detached := l.releaseLease(ctx, h.lease, until)
	if hs != nil {
		l.released(*hs, ctx, h, start, false, err)
	}
	if yielding && err == nil {
		now := time.Now()
		l.noteReleased(h.lease.Name, now, now.Sub(stepStart))
	}
	l.wakeLocalAfter(h.lease.Name, front)
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return errorf("dlock: release %s: lease found expired or taken over: %w", quote(h.lease.Name), ErrNotHeld)
	case err != nil && !detached && retryRelease(err):
		values := context.WithoutCancel(ctx)
		l.goBackground(func() { l.keepReleasing(values, h.lease, until, err) })
		return errorf("dlock: release %s: %w (retried in the background until the lease could have run out)", quote(h.lease.Name), err)
	case err != nil:
		return errorf("dlock: release %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

// releaseLease runs the driver's release of lease with a context that
// keeps ctx's values but not its cancellation, bounded by cleanupTimeout
// (see cleanupContext).
// It returns the step's error, or, if ctx ends while the step is under
// way, an error wrapping ctx's and detached: the step finishes in the
// background, where a failure is retried until the lease could have run
// out (until).
func (l *Locker) releaseLease(ctx context.Context, lease driver.Lease, until time.Time) (err error, detached bool) {
	lease = ownerOnly(lease)
	endedBefore := ctx.Err() != nil
	if !endedBefore && l.inline {
		// The driver honours ctx: try in this goroutine (the hot path:
		// no context of its own), and only if ctx ends during the step
		// finish it detached.
		err := l.release(ctx, lease)
		if err == nil || ctx.Err() == nil {
			return err, false
		}
	}
	if endedBefore || ctx.Done() == nil {
		// ctx ended before the call, so it asks for no earlier return
		// than the step's own bound, or it cannot end: run the step
		// here, bounded even if the driver ignores contexts, and report
		// its outcome.
		rctx := l.cleanupContext(context.WithoutCancel(ctx))
		_, err := call(l, rctx, func() (struct{}, error) { return struct{}{}, l.release(rctx, lease) }, nil)
		return err, false
	}
	rctx := l.cleanupContext(context.WithoutCancel(ctx))
	result := make(chan error, 1)
	step := func() { result <- l.release(rctx, lease) }
	if !l.goBackground(step) {
		step()
		return <-result, false
	}
	select {
	case err := <-result:
		return err, false
	case <-ctx.Done():
		l.goBackground(func() { l.keepReleasing(context.WithoutCancel(ctx), lease, until, <-result) })
		return fmt.Errorf("%w (the release goes on in the background)", ctxErr(ctx)), true
	}
}

// cleanupTimeout bounds the server steps the Locker finishes on its own:
// releasing what an abandoned or late acquisition took, a Release whose
// caller's context ended, and Close.
const cleanupTimeout = 5 * time.Second

// cleanupContext returns a context with the values of values, which
// cannot end, that ends between cleanupTimeout-cleanupShare and
// cleanupTimeout from now. Calls within cleanupShare of each other share
// one deadline and its timer, so that a release does not start and stop
// a timer of its own.
func (l *Locker) cleanupContext(values context.Context) context.Context {
	now := time.Now()
	d := l.cleanupDeadline.Load()
	if d == nil || now.Sub(d.made) > cleanupShare {
		d = &sharedDeadline{made: now}
		d.ctx, d.cancel = context.WithDeadline(context.Background(), now.Add(cleanupTimeout))
		l.cleanupDeadline.Store(d)
	}
	return &closedBy{Context: d.ctx, values: values}
}

// cleanupShare is how long cleanupContext keeps handing out one deadline.
const cleanupShare = 100 * time.Millisecond

// sharedDeadline is a context that ends cleanupTimeout after it was made.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc // never called: steps may use ctx until its deadline, which frees its timer
	made   time.Time
}

// retryRelease reports whether a release that failed with err may succeed
// if tried again: the store could not be reached or failed (an error of
// kind driver.ErrorTransient or driver.ErrorOther), rather than said the
// lease is gone (driver.ErrNotHeld), refused the step (ErrDenied: kind
// driver.ErrorDenied) or the write (ErrNoSpace: driver.ErrorNoSpace), or
// was handed a bad argument (ErrInvalid). err comes from l.release, so
// storeError has already turned those kinds into their sentinels.
func retryRelease(err error) bool {
	return err != nil && !errors.Is(err, driver.ErrNotHeld) && !errors.Is(err, ErrDenied) &&
		!errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrInvalid)
}

// Bounds of keepReleasing's backoff between tries.
const (
	releaseRetryMin = 100 * time.Millisecond
	releaseRetryMax = 2 * time.Second
)

// keepReleasing tries again to free lease, whose release failed with err
// (nil: nothing to do), until a try succeeds or fails for good, the lease
// could have run out by itself (until), or the Locker closes. Each try is
// one owner-checked step, so a late one never frees another owner's lock;
// it runs with the values of values.
func (l *Locker) keepReleasing(values context.Context, lease driver.Lease, until time.Time, err error) {
	lease = ownerOnly(lease)
	delay := releaseRetryMin
	for retryRelease(err) {
		wait := time.Until(until)
		if wait <= 0 {
			return
		}
		t := time.NewTimer(min(jitter(delay), wait))
		select {
		case <-t.C:
		case <-l.closing:
			t.Stop()
			return
		}
		delay = min(2*delay, releaseRetryMax)
		ctx, cancel := context.WithTimeout(values, min(time.Until(until), cleanupTimeout))
		err = l.release(ctx, lease)
		cancel()
		if err == nil {
			l.wakeLocal(lease.Name)
		}
	}
}

// release runs the driver's Release of lease and returns its error
// through storeError: every release step of the core goes through it.
func (l *Locker) release(ctx context.Context, lease driver.Lease) error {
	return l.storeError(l.drv.Release(ctx, lease))
}

// ownerOnly returns lease without its token: releases are owner-checked
// only, so that a lease is freed whatever token the store holds for its
// owner (the owner string is unique to one acquisition).
func ownerOnly(lease driver.Lease) driver.Lease {
	lease.Fence, lease.Takeover = 0, ""
	return lease
}

// abandon frees a lease whose Acquire reply was lost (cancelled or failed
// mid-flight), in case the server took it anyway, or that was taken after
// Close began. The owner string is unique to this attempt, so this never
// frees another owner's lock. It runs in the background, or at once if
// the Locker is closing (Close waits for the Acquire calling it).
func (l *Locker) abandon(lease driver.Lease) {
	release := func() { l.releaseDetached(lease) }
	if !l.goBackground(release) {
		release()
	}
}

// lateRelease is how long after abandon a lease whose caller gave up with
// its request on the way is released again: long enough for a cancel
// request to reach the server.
const lateRelease = time.Second

// lateQueue holds the second releases of abandon, run in order by one
// goroutine of the Locker's at a time, so that a thousand waits given up
// at once cost the store one connection, not one each (MariaDB refused
// connections when each had its own).
type lateQueue struct {
	mu      sync.Mutex
	queue   []lateItem // in due order
	running bool       // a goroutine drains queue
}

// lateItem is one lease to release again at due.
type lateItem struct {
	lease driver.Lease
	due   time.Time
}

// releaseLater queues lease for a release lateRelease from now, for an
// acquisition step that ended because its caller gave up: its request may
// still be on its way. A client returns when its context ends, but does
// not take back what it sent, and the store may run it after abandon's
// release (MySQL runs a statement it has read to its end; nats.go and
// gRPC send a request whatever becomes of its caller; sqllock's
// PostgreSQL dialect waits for the answer itself, but only up to a
// second). Such a late grant then keeps the name for a second or so, not
// for its lease.
func (l *Locker) releaseLater(lease driver.Lease) {
	q := &l.late
	q.mu.Lock()
	q.queue = append(q.queue, lateItem{lease, time.Now().Add(lateRelease)})
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !l.goBackground(l.drainLate) {
		q.drop() // closing: Close frees nothing it does not hold
	}
}

// drainLate releases the queued leases as each falls due, until the
// queue is empty or the Locker closes.
func (l *Locker) drainLate() {
	q := &l.late
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		next := q.queue[0]
		q.mu.Unlock()
		if wait := time.Until(next.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.closing:
				t.Stop()
				q.drop()
				return
			}
		}
		l.releaseDetached(next.lease)
		q.mu.Lock()
		q.queue = q.queue[1:]
		q.mu.Unlock()
	}
}

// drop empties the queue and marks it drained.
func (q *lateQueue) drop() {
	q.mu.Lock()
	q.queue, q.running = nil, false
	q.mu.Unlock()
}

// releaseDetached frees lease with a context of its own, bounded by
// cleanupTimeout, ignoring the outcome: a lease ends by its TTL anyway,
// and the drivers whose entries live as long as a session (ZooKeeper's
// children, etcd's keys) keep an entry they could not remove as an
// orphan, removed once the store answers.
func (l *Locker) releaseDetached(lease driver.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	l.release(ctx, ownerOnly(lease))
}

// abandonLate is call's late handler for Acquire: it frees what a step
// that completed after its caller gave up may have taken.
func (l *Locker) abandonLate(lease driver.Lease) func(driver.Result, error) {
	return func(res driver.Result, err error) {
		if res.Acquired || err != nil {
			l.releaseDetached(lease)
		}
	}
}
