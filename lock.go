package dlock

import (
	"context"
	"errors"
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

	// Guarded by h.l.mu: the channel Warnings returned, if it was called,
	// and whether it is closed.
	warnings  chan Warning
	warnEnded bool
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

// Deadline returns the moment Done closes unless the lease is renewed
// first: the TTL, less a tenth, from when the store last confirmed the
// lease (the acquisition or the latest renewal); the server's lease
// cannot end before it. It moves forward with each renewal. It carries
// a monotonic clock reading, so time.Until(k.Deadline()) is not moved by
// steps of the wall clock. Once this handle is released or the lock is
// lost it returns the zero Time.
func (k *Lock) Deadline() time.Time {
	l := k.h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.done || k.h.state != active {
		return time.Time{}
	}
	return k.h.deadline
}

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
	lease, err := k.beginRefresh(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	err = refreshOne(l, ctx, lease)
	l.mu.Lock()
	h.refreshing--
	l.stepDone()
	switch {
	case err == nil:
		h.extended(start, lease.TTL)
	case errors.Is(err, driver.ErrNotHeld):
		l.lose(h, hook.LossNotHeld, errorf("%w: refresh found it held by no one or another owner", ErrLost))
	}
	done, st = k.done, h.state
	l.unlock()
	if serr := k.stateError("refresh", done, st); serr != nil {
		return serr
	}
	if err != nil {
		return errorf("dlock: refresh %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

// beginRefresh waits until no Extend of k's lease is under way (a refresh
// sent with the old TTL must not land after it), and counts a Refresh
// under way, which Extend waits for in turn. It returns the lease to
// send.
func (k *Lock) beginRefresh(ctx context.Context) (driver.Lease, error) {
	h, l := k.h, k.h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for h.extending && h.state == active {
		stepped := l.stepWaiter()
		l.mu.Unlock()
		select {
		case <-stepped:
		case <-ctx.Done():
			l.mu.Lock()
			return driver.Lease{}, errorf("dlock: refresh %s: %w", quote(h.lease.Name), ctxErr(ctx))
		}
		l.mu.Lock()
	}
	h.refreshing++
	return h.lease, nil
}

func (k *Lock) stateError(op string, done bool, st state) error {
	switch {
	case done:
		return errorf("dlock: %s %s: handle already released: %w", op, quote(k.h.lease.Name), ErrNotHeld)
	case st == lost:
		return errorf("dlock: %s %s: %w: %w", op, quote(k.h.lease.Name), ErrNotHeld, k.h.cause)
	case st == closed:
		return errorf("dlock: %s %s: %w: %w", op, quote(k.h.lease.Name), ErrNotHeld, ErrClosed)
	}
	return nil
}
