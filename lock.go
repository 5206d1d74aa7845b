package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// Lock is one handle on a held lock. Each successful Acquire or TryAcquire
// returns a new handle; re-entered acquisitions share the server-side lease
// and fencing token, and the name is freed when the last handle is
// released.
type Lock struct {
	h      *held
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   bool // Release was called on this handle; guarded by h.l.mu
	index  int  // in h.handles while open; guarded by h.l.mu
}

// Name returns the lock's name.
func (k *Lock) Name() string { return k.h.lease.Name }

// Fence returns the lock's fencing token. It strictly increases each time
// the name passes from free to held, so a store that remembers the highest
// token it has seen can reject writes from a holder that lost the lock.
// Each shared hold and each semaphore permit gets a token of its own,
// above every token issued before on the name. Re-entered handles share
// their acquisition's token.
func (k *Lock) Fence() uint64 { return k.h.lease.Fence }

// Owner returns the owner string the store keeps for this acquisition, as
// LockInfo.Owner reports it (Inspect, Observe): to tell this holder from
// others. Re-entered handles share it.
func (k *Lock) Owner() string { return k.h.lease.Owner }

// Done returns a channel that is closed when this handle is released or
// when ownership can no longer be guaranteed (the lease could not be
// renewed in time, or the lock was found gone). It is closed before the
// server-side lease can have run out.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Context returns a context that is cancelled when Done is closed;
// context.Cause reports why: ErrReleased, ErrClosed, or an error wrapping
// ErrLost. The context carries the values of the context given to the
// Acquire call that took the lock (trace ids, loggers), but not its
// cancellation, and the lock's owner: Acquire(k.Context(), name)
// on the same Locker re-enters name if this owner holds it, and otherwise
// takes name for this owner. Pass it to work that must stop when the lock
// is lost.
func (k *Lock) Context() context.Context { return k.ctx }

// Refresh extends the lease to its full TTL now. It returns nil only if
// the lock is still held when it returns: otherwise the error wraps
// ErrNotHeld (with the loss cause, or ErrClosed after the Locker closed),
// also when the lock was found lost while the call was under way.
func (k *Lock) Refresh(ctx context.Context) error {
	h, l := k.h, k.h.l
	l.mu.Lock()
	if h.state == active && !time.Now().Before(h.deadline) {
		// Past the loss deadline, even if the keeper has not got to it
		// yet: the lease may have run out, so this is a loss, not a
		// refresh.
		l.loseLapsed(h)
	}
	done, st := k.done, h.state
	l.unlock()
	if err := k.stateError("refresh", done, st); err != nil {
		return err
	}
	start := time.Now()
	err := refreshOne(l, ctx, h.lease)
	l.mu.Lock()
	switch {
	case err == nil:
		h.extended(start)
	case errors.Is(err, driver.ErrNotHeld):
		l.lose(h, hook.LossNotHeld, fmt.Errorf("%w: refresh found it held by no one or another owner", ErrLost))
	}
	done, st = k.done, h.state
	l.unlock()
	if serr := k.stateError("refresh", done, st); serr != nil {
		return serr
	}
	if err != nil {
		return fmt.Errorf("dlock: refresh %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

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
// seconds. If ctx ends before that step is answered, Release returns at
// once with an error wrapping ctx.Err(), and the step goes on in the
// background (Close waits for it).
func (k *Lock) Release(ctx context.Context) error {
	h, l := k.h, k.h.l
	l.mu.Lock()
	done, st := k.done, h.state
	if !done {
		k.done = true
		h.dropHandle(k)
	}
	last := !done && len(h.handles) == 0
	if last && st == active {
		l.forget(h, released)
	}
	until := h.deadline.Add(lossMargin(h.lease.TTL)) // the server's lease cannot end before
	l.mu.Unlock()
	k.cancel(ErrReleased)
	if err := k.stateError("release", done, st); err != nil {
		if last && st == lost {
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
	err, detached := l.releaseLease(ctx, h.lease, until)
	if hs != nil {
		l.released(*hs, ctx, h, start, false, err)
	}
	l.wakeLocal(h.lease.Name)
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return fmt.Errorf("dlock: release %s: lease found expired or taken over: %w", quote(h.lease.Name), ErrNotHeld)
	case err != nil && !detached && retryRelease(err):
		values := context.WithoutCancel(ctx)
		l.goBackground(func() { l.keepReleasing(values, h.lease, until, err) })
		return fmt.Errorf("dlock: release %s: %w (retried in the background until the lease could have run out)", quote(h.lease.Name), err)
	case err != nil:
		return fmt.Errorf("dlock: release %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

// releaseLease runs the driver's release of lease with a context that
// keeps ctx's values but not its cancellation, bounded by cleanupTimeout
// (see cleanupContext).
// It returns the step's error, or, if ctx ends first, an error wrapping
// ctx's and detached: the step finishes in the background, where a
// failure is retried until the lease could have run out (until).
func (l *Locker) releaseLease(ctx context.Context, lease driver.Lease, until time.Time) (err error, detached bool) {
	lease = ownerOnly(lease)
	if l.inline && ctx.Err() == nil {
		// The driver honours ctx: try in this goroutine, and only if ctx
		// ends during the step finish it detached.
		err := l.drv.Release(ctx, lease)
		if err == nil || ctx.Err() == nil {
			return err, false
		}
	}
	if ctx.Done() == nil {
		// ctx cannot end: run the step here, bounded.
		return l.drv.Release(l.cleanupContext(ctx), lease), false
	}
	rctx := l.cleanupContext(context.WithoutCancel(ctx))
	result := make(chan error, 1)
	step := func() { result <- l.drv.Release(rctx, lease) }
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

// retryRelease reports whether a release that failed with err may succeed
// if tried again: the store could not be reached or failed, rather than
// said the lease is gone or refused the step.
func retryRelease(err error) bool {
	return err != nil && !errors.Is(err, driver.ErrNotHeld) && !errors.Is(err, ErrDenied) && !errors.Is(err, ErrInvalid)
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
		err = l.drv.Release(ctx, lease)
		cancel()
		if err == nil {
			l.wakeLocal(lease.Name)
		}
	}
}

func (k *Lock) stateError(op string, done bool, st state) error {
	switch {
	case done:
		return fmt.Errorf("dlock: %s %s: handle already released: %w", op, quote(k.h.lease.Name), ErrNotHeld)
	case st == lost:
		return fmt.Errorf("dlock: %s %s: %w: %w", op, quote(k.h.lease.Name), ErrNotHeld, k.h.cause)
	case st == closed:
		return fmt.Errorf("dlock: %s %s: %w: %w", op, quote(k.h.lease.Name), ErrNotHeld, ErrClosed)
	}
	return nil
}

// ownerOnly returns lease without its token: releases are owner-checked
// only, so that a lease is freed whatever token the store holds for its
// owner (the owner string is unique to one acquisition).
func ownerOnly(lease driver.Lease) driver.Lease {
	lease.Fence, lease.Takeover = 0, ""
	return lease
}
