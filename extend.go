package dlock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// Extend sets the lease of the held lock to ttl from now, on the store,
// in one owner-checked step, as Redisson's updateLeaseTime and bsm's
// Refresh(ctx, ttl) do: shorter or longer than the TTL it was taken with,
// within [100ms, 24h] (else the error wraps ErrInvalid). Later
// renewals, every ttl/3, keep it at ttl, and Deadline (when Done closes
// unless renewed) moves to 0.9×ttl after the step was sent. Re-entered
// handles share the lease, so Extend on one changes it for all.
//
// Extend returns nil only if the store set the new lease. If the lock is
// no longer held the error wraps ErrNotHeld (and Done closes, as for a
// failed renewal). If the outcome is unknown (the store did not answer
// in time) the lease on the store has either length: the lock keeps
// renewing with ttl, and its Deadline is the earlier of the two until a
// renewal confirms one. A backend that cannot change a lease's length
// gives an error wrapping ErrUnsupported (ZooKeeper, whose locks live as
// long as their session).
func (k *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	h, l := k.h, k.h.l
	if ttl < driver.MinTTL || ttl > driver.MaxTTL {
		return errorf("dlock: extend %s: ttl %v out of range [%v, %v]: %w", quote(h.lease.Name), ttl, driver.MinTTL, driver.MaxTTL, ErrInvalid)
	}
	ext, ok := l.drv.(driver.Extender)
	if !ok {
		return errorf("dlock: extend %s: the %s backend cannot change a lease's length: %w", quote(h.lease.Name), l.backend, ErrUnsupported)
	}
	lease, start, err := k.beginExtend(ctx, ttl)
	if err != nil {
		return err
	}
	err = l.storeError(extendStep(l, ctx, ext, lease))
	l.mu.Lock()
	h.extending = false
	l.stepDone()
	switch {
	case err == nil:
		h.setDeadline(start.Add(ttl - lossMargin(ttl)))
		h.renewErr = nil
		h.extended(start, ttl)
	case errors.Is(err, driver.ErrNotHeld):
		l.lose(h, hook.LossNotHeld, errorf("%w: extend found it held by no one or another owner", ErrLost))
	}
	if h.state == active && h.renew {
		l.books.renewals.push(h)
		l.schedule(h.nextRenew)
	}
	done, st := k.done, h.state
	l.unlock()
	if serr := k.stateError("extend", done, st); serr != nil {
		return serr
	}
	if err != nil {
		return errorf("dlock: extend %s to %v: %w", quote(h.lease.Name), ttl, err)
	}
	return nil
}

// beginExtend waits until no renewal of k's lease is under way, then
// takes the lease out of the keeper's renewals until Extend is done (so
// that no renewal sent with the old TTL lands after the new one), sets
// the TTL that renewals use from now on, and brings the deadline forward
// if the new lease could end sooner. It returns the lease to send and
// when it is sent.
func (k *Lock) beginExtend(ctx context.Context, ttl time.Duration) (driver.Lease, time.Time, error) {
	h, l := k.h, k.h.l
	for {
		l.mu.Lock()
		if h.state == active && !time.Now().Before(h.deadline) {
			l.loseLapsed(h)
		}
		done, st := k.done, h.state
		if err := k.stateError("extend", done, st); err != nil {
			l.unlock()
			return driver.Lease{}, time.Time{}, err
		}
		if !h.extending && h.refreshing == 0 && (!h.renew || h.index[byRenewal] >= 0) {
			break
		}
		stepped := l.stepWaiter()
		l.mu.Unlock()
		select {
		case <-stepped:
		case <-ctx.Done():
			return driver.Lease{}, time.Time{}, errorf("dlock: extend %s: %w", quote(h.lease.Name), ctxErr(ctx))
		}
	}
	defer l.mu.Unlock()
	h.extending = true
	l.books.renewals.remove(h)
	start := time.Now()
	h.lease.TTL = ttl
	h.setDeadline(earliest(h.deadline, start.Add(ttl-lossMargin(ttl))))
	return h.lease, start, nil
}

// setDeadline moves h's loss deadline to d, earlier or later, and makes
// the keeper look at it in time. Called with l.mu held.
func (h *held) setDeadline(d time.Time) {
	h.deadline = d
	h.l.books.deadlines.fix(h)
	h.l.schedule(d)
}

func extendStep(l *Locker, ctx context.Context, ext driver.Extender, lease driver.Lease) error {
	if l.direct(ctx) {
		return ext.Extend(ctx, lease)
	}
	_, err := call(l, ctx, func() (struct{}, error) {
		return struct{}{}, ext.Extend(ctx, lease)
	}, nil)
	return err
}

// stepWaiter returns a channel that is closed when a step on a lease ends
// (a renewal batch applied, a Refresh or Extend done, an acquisition
// forgotten): Extend and Refresh wait on it for the steps they must not
// overlap. Called with l.mu held.
func (l *Locker) stepWaiter() <-chan struct{} {
	if l.stepped == nil {
		l.stepped = make(chan struct{})
	}
	return l.stepped
}

// stepDone wakes the calls waiting on stepWaiter, if any. Called with
// l.mu held.
func (l *Locker) stepDone() {
	if l.stepped != nil {
		close(l.stepped)
		l.stepped = nil
	}
}
