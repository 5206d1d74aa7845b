package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
)

// lease renews a lock taken WithoutRenewal and remembers when the store
// last confirmed it, so that dlock can tell, after it was stopped or
// frozen, whether the lease may have run out meanwhile. (The core renews
// too, but does not say when; with renewal off, Lock.Refresh is the
// documented way to renew, and the core still closes Done if no renewal
// succeeds in time.)
type lease struct {
	lock *dlock.Lock
	ttl  time.Duration
	good atomic.Int64 // clock() at the start of the last confirmed acquisition or renewal
	// warn, if set, is told that renewals fail while the lease still
	// runs, and that they recovered (as Lock.Warnings tells a library
	// user: the core renews nothing here).
	warn func(format string, args ...any)
}

// newLease starts from an acquisition whose request was sent at start.
func newLease(lock *dlock.Lock, ttl, start time.Duration) *lease {
	v := &lease{lock: lock, ttl: ttl}
	v.good.Store(int64(start))
	return v
}

// since is how long ago the store last confirmed the lease.
func (v *lease) since() time.Duration { return clock() - time.Duration(v.good.Load()) }

// expired reports whether the lease may have ended on the server: no
// confirmation for a whole TTL.
func (v *lease) expired() bool { return v.since() >= v.ttl }

// vouched reports whether the lock is certainly still held: Done is open
// and the last confirmation is recent enough that the core would not yet
// give the lock up (it does so at 0.9×TTL, before the server can).
func (v *lease) vouched() bool {
	select {
	case <-v.lock.Done():
		return false
	default:
	}
	return v.since() < v.ttl-v.ttl/10
}

// renewOnce renews the lease now. It returns the error of Lock.Refresh.
func (v *lease) renewOnce(ctx context.Context) error {
	start := clock()
	left := time.Duration(v.good.Load()) + v.ttl - v.ttl/10 - start
	if left <= 0 {
		return errors.New("lease left to renew is gone")
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	err := v.lock.Refresh(ctx)
	if err == nil {
		v.good.Store(int64(start))
	}
	return err
}

// renew renews the lease every TTL/3, and TTL/10 after a failed attempt,
// until ctx ends or the lock is done (released or lost: the core closes
// Done when a renewal finds the lock gone or none succeeds in time). It
// is run in its own goroutine by run, which cancels ctx before it exits.
func (v *lease) renew(ctx context.Context) {
	next := time.Duration(v.good.Load()) + v.ttl/3 - clock()
	failing := false
	for {
		t := time.NewTimer(max(next, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-v.lock.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = v.ttl / 3
		if err := v.renewWarned(ctx, &failing); err != nil {
			if errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrClosed) {
				return
			}
			next = v.ttl / 10
		}
	}
}

// renewWarned is renewOnce that tells v.warn when the renewal fails or
// has no answer TTL/6 after it was sent (half the TTL since the last
// confirmed one, as Lock.Warnings), and when renewals recover; *failing
// records whether the last one failed.
func (v *lease) renewWarned(ctx context.Context, failing *bool) error {
	if v.warn == nil {
		return v.renewOnce(ctx)
	}
	name := v.lock.Name()
	slow := time.AfterFunc(v.ttl/6, func() {
		v.warn("warning: the renewal of %q has no answer after %v; the lock is held for %v more unless one succeeds", name, v.ttl/6, max(v.ttl-v.ttl/10-v.since(), 0).Round(time.Millisecond))
	})
	err := v.renewOnce(ctx)
	slow.Stop()
	switch {
	case err != nil && !errors.Is(err, dlock.ErrNotHeld) && !errors.Is(err, dlock.ErrClosed):
		*failing = true
		v.warn("warning: the renewal of %q failed (%s); the lock is held for %v more unless one succeeds", name, plain(err.Error()), max(v.ttl-v.ttl/10-v.since(), 0).Round(time.Millisecond))
	case err == nil && *failing:
		*failing = false
		v.warn("the renewals of %q recovered", name)
	}
	return err
}
