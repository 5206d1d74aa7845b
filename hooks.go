package dlock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// AddHook adds h to the hooks that observe l; hooks run in the order they
// were added. Package [hook] says what a hook sees and in which goroutine
// each of its funcs is called; [hook.Slog] logs with log/slog.
//
// Add hooks before using the Locker: AddHook is safe at any time, but an
// Acquire reports its AcquireDone to the hooks there were when it began,
// so a hook added while calls are under way can hear the release of a
// lock whose acquisition it did not hear.
func (l *Locker) AddHook(h hook.Hook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var hs []hook.Hook
	if old := l.hooks.Load(); old != nil {
		hs = append(hs, *old...)
	}
	hs = append(hs, h)
	l.hooks.Store(&hs)
}

// acquireHooked runs an acquisition that is not a re-entry between the
// hooks' AcquireStart and AcquireDone.
func (l *Locker) acquireHooked(hs []hook.Hook, a *attempt, wait bool) (*Lock, error) {
	start := time.Now()
	se := hook.AcquireStart{Backend: l.backend, Name: a.lease.Name, Wait: wait,
		Shared: a.lease.Shared, Limit: a.lease.Limit, TTL: a.lease.TTL}
	ctx := a.ctx
	for _, h := range hs {
		if h.AcquireStart != nil {
			if c := h.AcquireStart(ctx, se); c != nil {
				ctx = c
			}
		}
	}
	a.ahead = -1
	k, err := l.acquireOn(a, wait)
	e := hook.AcquireDone{AcquireStart: se, Err: err, Owner: a.lease.Owner,
		Duration: time.Since(start), Attempts: int(a.attempts), Contended: a.contended, Ahead: int(a.ahead)}
	switch {
	case err == nil:
		e.Outcome, e.Fence = hook.Acquired, k.Fence()
	case errors.Is(err, ErrNotAcquired):
		e.Outcome = hook.NotAcquired
	case a.ctx.Err() != nil && errors.Is(err, a.ctx.Err()):
		e.Outcome = hook.Canceled
	default:
		e.Outcome = hook.AcquireFailed
	}
	for _, h := range hs {
		if h.AcquireDone != nil {
			h.AcquireDone(ctx, e)
		}
	}
	return k, err
}

// reentered reports a re-entry that made handle k, the acquisition's
// handles-th open handle.
func (l *Locker) reentered(ctx context.Context, k *Lock, handles int) {
	hs := l.hooks.Load()
	if hs == nil {
		return
	}
	e := hook.Reentry{Backend: l.backend, Name: k.h.lease.Name, Owner: k.h.lease.Owner, Fence: k.h.lease.Fence, Handles: handles}
	for _, h := range *hs {
		if h.Reentered != nil {
			h.Reentered(ctx, e)
		}
	}
}

// released reports that h's lease was freed on the store (or the attempt
// failed) by a call that began at start and returned err.
func (l *Locker) released(hs []hook.Hook, ctx context.Context, h *held, start time.Time, closed bool, err error) {
	e := hook.Release{Backend: l.backend, Name: h.lease.Name, Owner: h.lease.Owner, Fence: h.lease.Fence,
		Held: start.Sub(h.start), Duration: time.Since(start), Closed: closed, Err: err}
	switch {
	case err == nil:
		e.Outcome = hook.Released
	case errors.Is(err, driver.ErrNotHeld):
		e.Outcome = hook.ReleaseNotHeld
	default:
		e.Outcome = hook.ReleaseFailed
	}
	for _, hk := range hs {
		if hk.Released != nil {
			hk.Released(ctx, e)
		}
	}
}

// renewed reports a renewal batch's outcome.
func (l *Locker) renewed(hs []hook.Hook, r refreshResult) {
	e := hook.Renewal{Backend: l.backend, Size: len(r.batch), Duration: r.took}
	for i := range r.batch {
		err := r.err(i)
		switch {
		case err == nil:
			e.Renewed++
			continue
		case errors.Is(err, driver.ErrNotHeld):
			e.NotHeld++
		default:
			e.Failed++
		}
		if e.Err == nil {
			e.Err = err
		}
	}
	for _, h := range hs {
		if h.Renewed != nil {
			h.Renewed(e)
		}
	}
}

// lossRecord is a loss recorded under l.mu, for the hooks to hear of once
// it is released.
type lossRecord struct {
	h      *held
	reason hook.LossReason
	cause  error
	at     time.Time
}

// unlock releases l.mu and then reports to the hooks the losses recorded
// while it was held. Every path that can lose a lock unlocks with it.
func (l *Locker) unlock() {
	pending := l.lostPending
	l.lostPending = nil
	l.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	hs := l.hooks.Load()
	if hs == nil {
		return
	}
	for _, r := range pending {
		e := hook.Loss{Backend: l.backend, Name: r.h.lease.Name, Owner: r.h.lease.Owner, Fence: r.h.lease.Fence,
			Held: r.at.Sub(r.h.start), Reason: r.reason, Cause: r.cause}
		for _, h := range *hs {
			if h.Lost != nil {
				h.Lost(r.h.values(), e)
			}
		}
	}
}
