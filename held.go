package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

type state int8

const (
	active   state = iota // held, renewed if asked
	released              // freed by the last Release
	lost                  // ownership no longer guaranteed
	closed                // released by Locker.Close
)

// held is one server-side acquisition, shared by its re-entered handles.
type held struct {
	l      *Locker
	lease  driver.Lease
	fence  uint64
	owner  *owner
	start  time.Time       // when the lease began (local, monotonic)
	values context.Context // the acquiring call's context, without its cancellation
	ctx    context.Context // carries owner and values; cancelled on last release or loss
	cancel context.CancelCauseFunc

	renew bool // renewed by the keeper (set once)

	// Guarded by l.mu.
	state     state
	count     int32     // open handles
	deadline  time.Time // monotonic: Done closes here unless renewed
	nextRenew time.Time
	index     [2]int // positions in l.deadlines and l.renewals, -1 when absent
}

// lossMargin is how long before the server-side lease can end that the
// core gives up on a lock: a tenth of the TTL, which also covers clock rate
// differences between client and server (assumed well under 1%).
func lossMargin(ttl time.Duration) time.Duration { return ttl / 10 }

func newHeld(l *Locker, values context.Context, lease driver.Lease, fence uint64, start time.Time, renew bool) *held {
	h := &held{l: l, lease: lease, fence: fence, renew: renew, start: start, values: context.WithoutCancel(values), index: [2]int{-1, -1}}
	h.extended(start)
	return h
}

// extended records a successful acquire or refresh whose request was sent
// at start: the server's lease cannot end before start+TTL. Called with
// l.mu held (or before h is shared).
func (h *held) extended(start time.Time) {
	if h.state != active {
		return
	}
	ttl := h.lease.TTL
	if d := start.Add(ttl - lossMargin(ttl)); d.After(h.deadline) {
		h.deadline = d
		h.l.deadlines.fix(h)
	}
	h.nextRenew = start.Add(ttl / 3)
	h.l.renewals.fix(h)
}

// newHandle returns a new handle on h. Called with l.mu held.
func (h *held) newHandle() *Lock {
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(context.WithValue(h.values, ownerKey{}, h.owner))
	}
	h.count++
	ctx, cancel := context.WithCancelCause(h.ctx)
	return &Lock{h: h, ctx: ctx, cancel: cancel}
}

// track adds a new acquisition to the Locker's books and makes the keeper
// look at it in time. Called with l.mu held.
func (l *Locker) track(h *held) {
	l.held[h.lease.Owner] = h
	l.deadlines.push(h)
	next := h.deadline
	if h.renew {
		l.renewals.push(h)
		next = earliest(next, h.nextRenew)
	}
	l.schedule(next)
}

// forget removes h from the Locker's books and sets its final state.
// Called with l.mu held.
func (l *Locker) forget(h *held, s state) {
	if h.state != active {
		return
	}
	h.state = s
	delete(l.held, h.lease.Owner)
	l.deadlines.remove(h)
	l.renewals.remove(h)
	if h.owner.names[h.lease.Name] == h {
		delete(h.owner.names, h.lease.Name)
	}
}

// loseLapsed is lose for a lock whose loss deadline passed before a
// renewal succeeded. Called with l.mu held.
func (l *Locker) loseLapsed(h *held) {
	l.lose(h, LossExpired, fmt.Errorf("%w: lease of %v could not be renewed in time", ErrLost, h.lease.TTL))
}

// lose marks h lost, closes its handles' Done with cause, and wakes local
// waiters on its name. Called with l.mu held, which the caller releases
// with l.unlock so that hooks hear of the loss.
func (l *Locker) lose(h *held, reason LossReason, cause error) {
	if h.state != active {
		return
	}
	l.forget(h, lost)
	h.cancel(cause)
	l.wakeLocalLocked(h.lease.Name)
	if l.hooks.Load() != nil {
		l.lostPending = append(l.lostPending, lossRecord{h: h, reason: reason, cause: cause, at: time.Now()})
	}
}
