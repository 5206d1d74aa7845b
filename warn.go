package dlock

import (
	"time"
)

// Warning is a change in the renewals of a held lock, sent on the
// channel that Lock.Warnings returns.
type Warning struct {
	// Err says why the lock is at risk: the last renewal's error, or
	// that no renewal has been confirmed for half the TTL (the store is
	// slow or does not answer). It is nil when renewals have recovered.
	Err error
	// Deadline is when Done closes unless a renewal succeeds first (a
	// monotonic reading, as Lock.Deadline).
	Deadline time.Time
}

// Warnings returns a channel on which the lock reports that its renewals
// are failing while its lease still runs, and that they recovered: a
// warning before a loss, as Curator's SUSPENDED comes before LOST. A
// value with a non-nil Err comes when a renewal fails (a store error, a
// refusal) or when no renewal has been confirmed for half the TTL since
// the last one was sent (a store that stalls: its renewal is still
// pending); a value with a nil Err comes when a renewal then succeeds.
// With renewals every TTL/3 and Done closing at 0.9×TTL, the first
// warning comes at least 0.4×TTL before Done closes, whatever the store
// does. The channel holds only the latest value (a slow reader misses
// none but the intermediate ones) and is closed when Done is closed, so
// a loop ranging over it ends with the lock.
//
// A warning is a hint, never proof: the lease may be gone already if the
// store lost it (Done then closes at the next renewal), and a lock whose
// renewals keep failing is lost at its deadline whatever was said. A lock
// taken WithoutRenewal gets no warnings, only the channel's close.
// Warnings costs nothing until it is first called: the lock is then
// watched by the Locker's keeper, with no goroutine of its own.
func (k *Lock) Warnings() <-chan Warning {
	h, l := k.h, k.h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.warnings != nil {
		return k.warnings
	}
	k.warnings = make(chan Warning, 1)
	if k.done || h.state != active {
		k.endWarnings()
		return k.warnings
	}
	if h.renew && !h.watched {
		h.watched = true
		l.books.warnings.push(h)
		l.schedule(h.warnAt)
	}
	if h.riskErr != nil {
		offer(k.warnings, Warning{Err: h.riskErr, Deadline: h.deadline})
	}
	return k.warnings
}

// warnAfter is how long after a renewal (or the acquisition) was sent the
// core warns of a lock that no later renewal has confirmed: half the TTL,
// which the renewal due at TTL/3 has missed by TTL/6.
func warnAfter(ttl time.Duration) time.Duration { return ttl / 2 }

// atRisk records that h's renewals are failing with err and tells its
// handles' Warnings channels. Called with l.mu held.
func (h *held) atRisk(err error) {
	h.riskErr = err
	h.warn(Warning{Err: err, Deadline: h.deadline})
}

// recovered records a renewal that succeeded after h was at risk.
// Called with l.mu held.
func (h *held) recovered() {
	if h.riskErr == nil {
		return
	}
	h.riskErr = nil
	h.warn(Warning{Deadline: h.deadline})
}

func (h *held) warn(w Warning) {
	for _, k := range h.handles {
		if k.warnings != nil {
			offer(k.warnings, w)
		}
	}
}

// offer puts w on ch (buffered 1) in place of any value not yet read. The
// caller holds l.mu, and only holders of l.mu send on ch, so the send
// after the drain cannot block.
func offer(ch chan Warning, w Warning) {
	select {
	case ch <- w:
	default:
		select {
		case <-ch:
		default:
		}
		ch <- w
	}
}

// endWarnings closes k's Warnings channel, if it has one, when its Done
// closes. Called with l.mu held.
func (k *Lock) endWarnings() {
	if k.warnings != nil && !k.warnEnded {
		k.warnEnded = true
		close(k.warnings)
	}
}

// lateRenewals marks at risk every watched lock whose renewal has gone
// unconfirmed for warnAfter(TTL), and takes it out of l.books.warnings
// until a renewal confirms it again. Called with l.mu held.
func (l *Locker) lateRenewals(now time.Time) {
	for h := l.books.warnings.top(); h != nil && !now.Before(h.warnAt); h = l.books.warnings.top() {
		l.books.warnings.pop()
		err := h.renewErr
		if err == nil {
			err = errorf("dlock: no renewal of %s confirmed for %v", quote(h.lease.Name), warnAfter(h.lease.TTL))
		}
		h.atRisk(err)
	}
}
