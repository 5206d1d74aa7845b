package sessionlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/pause"
)

// Queue is a store's fair queue of acquisitions, as Acquire and
// AcquireQueued use it. Q is a queue entry (a znode's path; a key, its
// create revision and session); its zero value means none. P names the
// predecessors a waiter waits for (see Place).
type Queue[Q comparable, P any] interface {
	// Join puts l's entry at the tail of the queue, or finds the one an
	// attempt whose reply was lost put there, and reads its position as
	// Position does, in the same request as the put where the store
	// allows (a transaction, or a read pipelined behind the put): an
	// uncontended acquisition needs no second round trip. On error it
	// returns the zero Q, or an entry for Leave if the put may have been
	// applied; a later Join of the same lease finds that entry again.
	// Where the put and the read are two steps, Join sets Result.Waited
	// if the put found the entry kept out (an exclusive entry behind
	// others), though the read found it holding: those ahead left in
	// between, and the lock was passed to it.
	Join(ctx context.Context, l driver.Lease) (Q, driver.Result, P, error)

	// Position reads the queue. If q holds by the rule of Place and
	// still belongs to the driver's live session, Position takes the lock
	// (Leases.Hold) and returns its Result; otherwise it returns the
	// predecessors whose leaving may let q in. Either way it sets
	// Result.Ahead to how many entries were ahead of q when it joined,
	// as well as the store can tell: exactly if Join counted them, else
	// those this read finds (entries only leave from ahead of q, so the
	// first read after Join misses only those that left meanwhile); -1
	// if unknown. It returns an error
	// wrapping ErrGone if q is no longer in the queue, so that the waiter
	// joins again, and one wrapping driver.ErrMode if Place does.
	Position(ctx context.Context, l driver.Lease, q Q) (driver.Result, P, error)

	// Wait returns nil when one of preds may have left the queue (or the
	// session was lost), and an error if ctx ended or the wait could not
	// be set.
	Wait(ctx context.Context, preds P) error

	// Leave removes q from the queue with a bounded context of its own
	// (the caller's may have ended). An entry it cannot remove becomes an
	// orphan. The zero Q is left alone.
	Leave(q Q)

	// Classify is the driver's driver.Classifier: a step that fails
	// with an error of kind driver.ErrorTransient is tried again after
	// RetryDelay while ctx lives; any other error ends the wait.
	driver.Classifier
}

// Driver is what the driver of a session store implements: the atomic
// steps, its fair queue, loss reports and the administrator's interfaces.
// The drivers assert it at compile time, so that a signature drift cannot
// silently turn a capability off (queued waiting into polling, say).
type Driver interface {
	driver.Driver
	driver.Queuer
	driver.LossReporter
	driver.Inspector
	driver.ForceReleaser
	driver.MultiHolder
	driver.ChangeNotifier
	driver.WaiterCounter
	driver.Classifier
}

// Acquire implements driver.Driver's Acquire: one attempt. If l's owner
// holds the lock in t already (a retry whose first reply was lost), it
// refreshes it instead. Otherwise it joins the queue and takes the lock if
// its entry holds by the rule of Place, or leaves the queue and returns a
// Result with Acquired false, and no error unless a step failed. Since it
// joins at the tail, it never takes a name that live waiters queue for.
func Acquire[E, Q comparable, P any](ctx context.Context, t *Leases[E], refresh func(context.Context, driver.Lease) error, q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	res, err := acquire(ctx, t, refresh, q, l)
	if err != nil {
		return res, fmt.Errorf("%s: acquire %q: %w", t.cfg.Name, l.Name, err)
	}
	return res, nil
}

func acquire[E, Q comparable, P any](ctx context.Context, t *Leases[E], refresh func(context.Context, driver.Lease) error, q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	if err := t.Err(); err != nil {
		return driver.Result{}, err
	}
	if _, fence, ok := t.Held(l.Owner); ok {
		err := refresh(ctx, l)
		if err == nil {
			return driver.Result{Acquired: true, Fence: fence}, nil
		}
		if !errors.Is(err, driver.ErrNotHeld) {
			return driver.Result{}, err
		}
	}
	var none Q
	e, res, _, err := q.Join(ctx, l)
	if err == nil && res.Acquired {
		return res, nil
	}
	if e != none {
		q.Leave(e) // not first, or failed: leave no entry behind
	}
	if err != nil && !errors.Is(err, ErrGone) {
		return driver.Result{}, err
	}
	return driver.Result{}, nil
}

// AcquireQueued implements driver.Queuer over t: it joins the queue and
// waits, watching only the predecessors that keep it out (see Place),
// until its entry holds.
// It joins again if its entry is gone (its session was lost), and tries
// again after RetryDelay on transient errors. If ctx ends or a step fails
// for good it leaves the queue and returns the error, which wraps
// ctx.Err() when ctx ended.
func AcquireQueued[E, Q comparable, P any](ctx context.Context, t *Leases[E], q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	res, err := acquireQueued(ctx, t, q, l)
	if err != nil {
		return res, fmt.Errorf("%s: acquire %q: %w", t.cfg.Name, l.Name, err)
	}
	return res, nil
}

func acquireQueued[E, Q comparable, P any](ctx context.Context, t *Leases[E], q Queue[Q, P], l driver.Lease) (driver.Result, error) {
	if err := t.Err(); err != nil {
		return driver.Result{}, err
	}
	var e, none Q
	// For Result.Waited and Ahead: whether this acquisition waited for
	// predecessors, and how many entries were ahead of the entry that
	// holds when it joined (the first read after its Join tells).
	waited, ahead, fresh := false, -1, false
	retry := func(err error) bool { return q.Classify(err) == driver.ErrorTransient && pause.For(ctx, RetryDelay) }
	fail := func(err error) (driver.Result, error) {
		if e != none {
			q.Leave(e)
		}
		return driver.Result{}, err
	}
	for {
		var (
			res  driver.Result
			pred P
			err  error
		)
		if e == none {
			if e, res, pred, err = q.Join(ctx, l); err != nil && !errors.Is(err, ErrGone) {
				if retry(err) {
					e = none // the next Join finds it if it was put
					continue
				}
				return fail(err)
			}
			fresh = true
		} else {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			res, pred, err = q.Position(ctx, l, e)
		}
		switch {
		case errors.Is(err, ErrGone):
			e = none // queue again, on a new session if this one was lost
			continue
		case err != nil:
			if retry(err) {
				continue
			}
			return fail(err)
		}
		if fresh {
			// Join may know that the entry was queued behind others
			// that have left before its read.
			ahead, waited, fresh = res.Ahead, res.Waited, false
		}
		if res.Acquired {
			res.Waited, res.Ahead = waited, ahead
			return res, nil
		}
		waited = true
		if err := q.Wait(ctx, pred); err != nil {
			if retry(err) {
				continue
			}
			return fail(err)
		}
	}
}
