package dlock

import (
	"context"
	"errors"
)

// Do acquires name (waiting, like Acquire), calls fn with the lock's Context, and releases
// the lock when fn returns, even if ctx was cancelled meanwhile. It returns fn's error, or the
// acquisition's error; if the lock was lost while fn ran, the error wraps ErrLost.
//
// The context fn gets carries ctx's values and ends when ctx ends or the
// lock is lost, whichever comes first. If the release fails because the
// store cannot be reached, Do does not report it: the lease ends by
// itself after its TTL.
func (l *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return errorf("dlock: do %s: nil func: %w", quote(name), ErrInvalid)
	}
	k, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	ferr, lost := k.run(ctx, fn)
	switch {
	case lost != nil && ferr != nil:
		return errorf("dlock: do %s: %w; fn returned: %w", quote(name), lost, ferr)
	case lost != nil:
		return errorf("dlock: do %s: %w", quote(name), lost)
	}
	return ferr
}

// run calls fn with a context that ends when ctx ends or k is lost, then
// releases k. It returns fn's error, and the loss cause if k was lost
// before the release.
func (k *Lock) run(ctx context.Context, fn func(ctx context.Context) error) (ferr, lost error) {
	fctx, cancel := context.WithCancelCause(k.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr = fn(fctx)
	stop()
	cancel(nil)
	switch cause := context.Cause(k.Context()); {
	case errors.Is(cause, ErrLost):
		lost = cause
	case errors.Is(cause, ErrClosed):
		lost = errorf("%w: %w", ErrLost, cause) // Close released it under fn
	}
	if err := k.Release(ctx); errors.Is(err, ErrNotHeld) && lost == nil {
		lost = errorf("%w: %w", ErrLost, err) // found gone at the release
	}
	return ferr, lost
}
