package sessionlock

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/pause"
)

// Queue is a store's fair queue of acquisitions, as Acquire and
// AcquireQueued use it. Q is a queue entry (a znode's path; a key, its
// create revision and session); its zero value means none. P names the
// predecessor a waiter waits for.
type Queue[Q comparable, P any] interface {
	// Join puts l's entry at the tail of the queue, or finds the one an
	// attempt whose reply was lost put there. On error it returns the
	// zero Q, or an entry for Leave if the put may have been applied.
	Join(ctx context.Context, l driver.Lease) (Q, error)

	// Position reads the queue. If q heads it and still belongs to the
	// driver's live session, Position takes the lock (Leases.Hold) and
	// returns its Result; otherwise it returns q's predecessor. It returns
	// an error wrapping ErrGone if q is no longer in the queue, so that
	// the waiter joins again.
	Position(ctx context.Context, l driver.Lease, q Q) (driver.Result, P, error)

	// Wait returns nil when pred may have left the queue (or the
	// session was lost), and an error if ctx ended or the wait could not
	// be set.
	Wait(ctx context.Context, pred P) error

	// Leave removes q from the queue with a bounded context of its own
	// (the caller's may have ended). An entry it cannot remove becomes an
	// orphan. The zero Q is left alone.
	Leave(q Q)

	// Transient reports whether err may go away on a new attempt while
	// ctx lives.
	Transient(ctx context.Context, err error) bool
}

// Acquire makes one attempt: it joins the queue and takes the lock if
// its entry heads the queue. Otherwise it leaves the queue and returns a
// Result with Acquired false, and no error unless a step failed. It
// implements driver.Driver's Acquire once the driver has checked that
// the owner does not hold the lock already.
func Acquire[Q comparable, P any](ctx context.Context, q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	var none Q
	e, err := q.Join(ctx, l)
	if err != nil {
		if e != none {
			q.Leave(e)
		}
		return driver.Result{}, err
	}
	res, _, err := q.Position(ctx, l, e)
	if err == nil && res.Acquired {
		return res, nil
	}
	q.Leave(e) // not first: leave no entry behind
	if err != nil && !errors.Is(err, ErrGone) {
		return driver.Result{}, err
	}
	return driver.Result{}, nil
}

// AcquireQueued implements driver.Queuer: it joins the queue and waits,
// one watch on its predecessor at a time, until its entry heads the queue.
// It joins again if its entry is gone (its session was lost), and tries
// again after RetryDelay on transient errors. If ctx ends or a step fails
// for good it leaves the queue and returns the error, which wraps
// ctx.Err() when ctx ended.
func AcquireQueued[Q comparable, P any](ctx context.Context, q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	var e, none Q
	retry := func(err error) bool { return q.Transient(ctx, err) && pause.For(ctx, RetryDelay) }
	fail := func(err error) (driver.Result, error) {
		if e != none {
			q.Leave(e)
		}
		return driver.Result{}, err
	}
	for {
		if e == none {
			var err error
			if e, err = q.Join(ctx, l); err != nil {
				if retry(err) {
					e = none // the next Join finds it if it was put
					continue
				}
				return fail(err)
			}
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		res, pred, err := q.Position(ctx, l, e)
		switch {
		case errors.Is(err, ErrGone):
			e = none // queue again, on a new session if this one was lost
			continue
		case err != nil:
			if retry(err) {
				continue
			}
			return fail(err)
		case res.Acquired:
			return res, nil
		}
		if err := q.Wait(ctx, pred); err != nil {
			if retry(err) {
				continue
			}
			return fail(err)
		}
	}
}
