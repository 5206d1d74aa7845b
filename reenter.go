package dlock

import (
	"context"

	"github.com/dlock-go/dlock/internal/lockmode"
)

// reenter returns a new handle on the acquisition of name that own holds,
// or nil if it holds none. The modes must agree (see Shared): a shared
// request in an exclusive hold re-enters it; an exclusive request in a
// shared hold (an upgrade) and any semaphore mismatch are errors.
func (l *Locker) reenter(ctx context.Context, own *owner, name string, o *acquireOptions) (*Lock, error) {
	if own == nil {
		return nil, nil
	}
	l.mu.Lock()
	k, err := l.reenterLocked(own, name, o)
	var handles int
	if k != nil {
		handles = len(k.h.handles)
	}
	l.mu.Unlock()
	if k != nil {
		l.reentered(ctx, k, handles)
	}
	return k, err
}

func (l *Locker) reenterLocked(own *owner, name string, o *acquireOptions) (*Lock, error) {
	if l.closed {
		return nil, errorf("dlock: acquire %s: %w", quote(name), ErrClosed)
	}
	h := own.get(name)
	if h == nil || h.state != active {
		return nil, nil
	}
	if h.lease.Limit != o.limit || (h.lease.Shared && !o.shared) {
		why := ""
		if h.lease.Shared && !o.shared && o.limit == 0 {
			why = " (an upgrade, which deadlocks two readers that both try it: release, then acquire exclusively)"
		}
		return nil, errorf("dlock: acquire %s %s inside a hold of it that is %s%s: %w", lockmode.String(o.shared, o.limit), quote(name), lockmode.String(h.lease.Shared, h.lease.Limit), why, ErrInvalid)
	}
	return h.newHandle(), nil
}
