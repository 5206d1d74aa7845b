package dlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// acquireLoop tries to take a.lease, and if wait is set waits between
// attempts for a wake-up: a store notification, a release in this Locker,
// or the holder's remaining lease running out. A waiter applies the
// takeover rule of driver.Result.Stamp: once it has seen the same Stamp
// for its StampTTL on its own clock, its next attempt carries it as
// Lease.Takeover.
func (l *Locker) acquireLoop(a *attempt, wait bool) (*Lock, error) {
	k, err := l.attemptLoop(a, wait)
	if k == nil && a.queued {
		// The store keeps this writer's intent: take it out, since the
		// wait ended without the lock.
		l.abandon(a.lease)
	}
	return k, err
}

func (l *Locker) attemptLoop(a *attempt, wait bool) (*Lock, error) {
	var (
		ctx   = a.ctx
		name  = a.lease.Name
		wake  <-chan struct{}
		local chan struct{}
		delay time.Duration
		obs   driver.Observer // the takeover rule, for this wait only
	)
	if !wait {
		// A single attempt takes over a holder in doubt only if earlier
		// attempts of this Locker saw its stamp unchanged for long enough.
		a.lease.Takeover = l.stamps.takeover(name, time.Now())
	}
	for {
		start := time.Now()
		a.attempts++
		var (
			res driver.Result
			err error
		)
		res, err = acquireOne(l, ctx, a.lease)
		sent := a.lease.Takeover
		a.lease.Takeover = "" // good for one attempt; never kept in a registered lease
		if err == nil && res.Acquired {
			var fence uint64
			fence, start, err = l.confirm(ctx, a.lease, res.Fence, start)
			if err == nil {
				if !wait {
					l.stamps.note(name, res, start)
				}
				return l.register(a, fence, start)
			}
			if errors.Is(err, driver.ErrNotHeld) {
				// The lease ran out before we could use it: not acquired.
				res, err = driver.Result{}, nil
			}
		}
		if err != nil {
			l.abandon(a.lease)
			return nil, l.acquireError(ctx, name, err)
		}
		a.contended = true
		a.queued = a.queued || res.Queued
		if !wait {
			l.stamps.note(name, res, time.Now())
			return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), ErrNotAcquired)
		}
		takeover, until := obs.Note(res, time.Now())
		a.lease.Takeover = takeover
		if local == nil {
			// Subscribe before the next attempt, so that a release
			// between that attempt and the wait is not missed.
			local = l.addWaiter(name)
			defer l.removeWaiter(name, local)
			if l.notifier != nil {
				w, stop, err := l.notifier.Watch(ctx, name)
				if err == nil {
					wake = w
					defer stop()
				} else if ctx.Err() != nil {
					return nil, l.acquireError(ctx, name, err)
				}
				// Any other error: wait without notifications.
			}
			continue
		}
		if takeover != "" && takeover != sent {
			// The holders the stamp names have given up by now. (If the
			// same takeover was just refused, the wait goes on as usual.)
			continue
		}
		var sleep time.Duration
		delay, sleep = l.nextDelay(delay, res.Remaining, wake != nil)
		if a.queued {
			sleep = min(sleep, a.lease.TTL/3) // the intent lasts a TTL
		}
		if until > 0 {
			sleep = min(sleep, until) // try again when a takeover is due
		}
		t := time.NewTimer(sleep)
		select {
		case <-wake:
		case <-local:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dlock: acquire %s: gave up after %d attempts: %w", quote(name), a.attempts, ctxErr(ctx))
		case <-l.closing:
			t.Stop()
			return nil, fmt.Errorf("dlock: acquire %s: %w", quote(name), ErrClosed)
		}
		t.Stop()
	}
}

// nextDelay returns the backoff state after prev and how long a waiter
// sleeps before its next attempt when nothing wakes it. With notifications
// it waits for the holder's lease to run out; without, it backs off
// exponentially (with jitter on the sleep, not on the state). Both are
// bounded by the Locker's longest retry interval and the holder's
// remaining lease.
func (l *Locker) nextDelay(prev, remaining time.Duration, notified bool) (next, sleep time.Duration) {
	switch {
	case notified && remaining > 0:
		next = remaining + time.Millisecond
	case notified:
		next = l.maxRetry
	case prev == 0:
		next = l.minRetry
	default:
		next = 2 * prev
	}
	next = min(next, l.maxRetry)
	sleep = next
	if !notified {
		sleep = jitter(sleep)
	}
	if remaining > 0 {
		sleep = min(sleep, remaining+time.Millisecond)
	}
	return next, sleep
}

// jitter returns a random duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2)
}
