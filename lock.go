package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
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
}

// Name returns the lock's name.
func (k *Lock) Name() string { return k.h.lease.Name }

// Fence returns the lock's fencing token. It strictly increases each time
// the name passes from free to held, so a store that remembers the highest
// token it has seen can reject writes from a holder that lost the lock.
// Re-entered handles share their acquisition's token.
func (k *Lock) Fence() uint64 { return k.h.fence }

// Done returns a channel that is closed when this handle is released or
// when ownership can no longer be guaranteed (the lease could not be
// renewed in time, or the lock was found gone). It is closed before the
// server-side lease can have run out.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Context returns a context that is cancelled when Done is closed;
// context.Cause reports why: ErrReleased, ErrClosed, or an error wrapping
// ErrLost. The context carries the lock's owner: Acquire(k.Context(), name)
// on the same Locker re-enters name if this owner holds it, and otherwise
// takes name for this owner. Pass it to work that must stop when the lock
// is lost.
func (k *Lock) Context() context.Context { return k.ctx }

// Refresh extends the lease to its full TTL now. The error wraps ErrNotHeld
// if the lock was released or lost, and ErrClosed after the Locker closed.
func (k *Lock) Refresh(ctx context.Context) error {
	h, l := k.h, k.h.l
	l.mu.Lock()
	done, st := k.done, h.state
	l.mu.Unlock()
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
		l.lose(h, fmt.Errorf("%w: refresh found it held by no one or another owner", ErrLost))
	}
	l.mu.Unlock()
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return fmt.Errorf("dlock: refresh %s: %w", quote(h.lease.Name), ErrNotHeld)
	case err != nil:
		return fmt.Errorf("dlock: refresh %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

// Release releases this handle. Releasing the last handle of an
// acquisition frees the name on the server, with one owner-checked atomic
// step that never frees another owner's lock, and wakes waiters. The error
// wraps ErrNotHeld if this handle was released already or the lock had
// been lost, and ErrClosed if the Locker's Close released it. If the
// server cannot be reached the lease ends by itself after its TTL.
func (k *Lock) Release(ctx context.Context) error {
	h, l := k.h, k.h.l
	l.mu.Lock()
	done, st := k.done, h.state
	k.done = true
	if !done {
		h.count--
	}
	last := !done && h.count == 0
	if last && st == active {
		l.forget(h, released)
	}
	l.mu.Unlock()
	k.cancel(ErrReleased)
	if err := k.stateError("release", done, st); err != nil {
		if last && st == lost {
			// The lease may still be ours on the server; free it early.
			// The owner check makes this safe whatever happened since.
			l.drv.Release(ctx, h.lease)
		}
		return err
	}
	if !last {
		return nil
	}
	_, err := call(l, ctx, func() (struct{}, error) { return struct{}{}, l.drv.Release(ctx, h.lease) }, nil)
	h.cancel(ErrReleased)
	l.wakeLocal(h.lease.Name)
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return fmt.Errorf("dlock: release %s: lease found expired or taken over: %w", quote(h.lease.Name), ErrNotHeld)
	case err != nil:
		return fmt.Errorf("dlock: release %s: %w", quote(h.lease.Name), err)
	}
	return nil
}

func (k *Lock) stateError(op string, done bool, st state) error {
	switch {
	case done:
		return fmt.Errorf("dlock: %s %s: handle already released: %w", op, quote(k.h.lease.Name), ErrNotHeld)
	case st == lost:
		return fmt.Errorf("dlock: %s %s: %w: %w", op, quote(k.h.lease.Name), ErrNotHeld, context.Cause(k.h.ctx))
	case st == closed:
		return fmt.Errorf("dlock: %s %s: %w", op, quote(k.h.lease.Name), ErrClosed)
	}
	return nil
}

func refreshOne(l *Locker, ctx context.Context, lease driver.Lease) error {
	_, err := call(l, ctx, func() (struct{}, error) {
		return struct{}{}, l.drv.Refresh(ctx, []driver.Lease{lease})[0]
	}, nil)
	return err
}
