package dlock

import (
	"context"
	"errors"
	"time"
)

// Lead campaigns for name and calls fn each time this Locker becomes its holder, with a ctx
// that ends when leadership is lost or ctx ends. When fn returns, Lead releases the name. If fn
// returned because leadership was lost, Lead campaigns again; otherwise Lead returns fn's
// error (nil included). Lead returns ctx's error once ctx ends.
//
// Campaigning is Acquire: woken, not polled, where the store can notify.
// If the leader's process dies, another Lead takes over once its lease
// ends: after the TTL (WithTTL) on every store but ZooKeeper, where locks
// live in the connection's session and end with its session timeout
// (zklock's doc).
// If the store fails while Lead campaigns, it tries again after a pause
// (at most the backend's longest retry interval) instead of returning;
// bad input, a closed Locker and a store that refuses the credentials or
// the step (ErrDenied: retrying would only repeat the refusal, as the
// store's logs would show) end it at once with that error.
func (l *Locker) Lead(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return errorf("dlock: lead %s: nil func: %w", quote(name), ErrInvalid)
	}
	for {
		k, err := l.Acquire(ctx, name, opts...)
		switch {
		case ctx.Err() != nil:
			if k != nil {
				k.Release(ctx)
			}
			return errorf("dlock: lead %s: %w", quote(name), ctxErr(ctx))
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrDenied), errors.Is(err, ErrUnsupported):
			return err
		case err != nil:
			// The store failed: campaign again after a pause.
			t := time.NewTimer(jitter(l.maxRetry))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			case <-l.closing:
				t.Stop()
			}
			continue
		}
		ferr, lost := k.run(ctx, fn)
		switch {
		case ctx.Err() != nil:
			return errorf("dlock: lead %s: %w", quote(name), ctxErr(ctx))
		case lost != nil:
			continue // leadership lost: campaign again
		}
		return ferr
	}
}
