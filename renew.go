package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// keep is the Locker's one background goroutine. It renews every held lock
// that asked for renewal, in batches (one driver.Refresh call for all locks
// due), and closes the Done of any lock whose local deadline passes before
// a renewal succeeded. It exits when Close closes l.closing, after waiting
// for its in-flight refresh.
//
// Each wake costs O(k log n) for the k locks due among n held: the keeper
// takes them from two heaps (deadlines, renewals) instead of scanning.
func (l *Locker) keep() {
	defer l.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer l.keeper.timer.Stop()
	results := make(chan refreshResult, 1)
	inflight := false
	var losses <-chan driver.Loss
	if r, ok := l.drv.(driver.LossReporter); ok {
		losses = r.Losses()
	}
	for {
		if batch := l.due(inflight); len(batch) > 0 {
			inflight = true
			go l.refresh(ctx, batch, results) // exits after one bounded driver call
		}
		select {
		case <-l.keeper.timer.C:
		case r := <-results:
			inflight = false
			l.applyRefresh(r)
		case loss, ok := <-losses:
			if !ok {
				losses = nil
				continue
			}
			l.applyLoss(loss)
		case <-l.closing:
			if inflight {
				cancel()
				<-results
			}
			return
		}
	}
}

// due closes the Done of every lock whose loss deadline has passed, takes
// the locks due for renewal out of l.books.renewals as one batch (none
// while a batch is out: inflight), and sets the keeper's timer for its
// next turn.
func (l *Locker) due(inflight bool) []*held {
	now := time.Now()
	l.mu.Lock()
	defer l.unlock()
	for h := l.books.deadlines.top(); h != nil && !now.Before(h.deadline); h = l.books.deadlines.top() {
		l.loseLapsed(h)
	}
	l.lateRenewals(now)
	// When one lock is due, renew with it every lock whose turn comes
	// within the next TTL/12 of its own: batches stay together. The locks
	// of a batch leave l.books.renewals until its outcome is applied.
	var batch []*held
	if h := l.books.renewals.top(); !inflight && h != nil && !now.Before(h.nextRenew) {
		for h != nil && !now.Before(h.nextRenew.Add(-h.lease.TTL/12)) {
			batch = append(batch, l.books.renewals.pop())
			h = l.books.renewals.top()
		}
	}
	next := now.Add(time.Hour)
	if h := l.books.deadlines.top(); h != nil {
		next = earliest(next, h.deadline)
	}
	if h := l.books.renewals.top(); h != nil && !inflight && len(batch) == 0 {
		next = earliest(next, h.nextRenew)
	}
	if h := l.books.warnings.top(); h != nil {
		next = earliest(next, h.warnAt)
	}
	l.keeper.at = next
	l.keeper.timer.Reset(next.Sub(now))
	return batch
}

type refreshResult struct {
	batch []*held
	ttls  []time.Duration // the TTL each lease was renewed for
	errs  []error
	start time.Time
	took  time.Duration
}

// err returns the outcome of the batch's i-th lease: the driver's, or an
// unknown outcome if the driver returned a result count that does not
// match the batch.
func (r refreshResult) err(i int) error {
	if len(r.errs) != len(r.batch) {
		return fmt.Errorf("driver returned %d results for %d leases", len(r.errs), len(r.batch))
	}
	return r.errs[i]
}

// refresh renews batch with one driver call, bounded by the earliest
// deadline in it (past that the renewal is useless), and sends the outcome.
func (l *Locker) refresh(ctx context.Context, batch []*held, results chan<- refreshResult) {
	leases := make([]driver.Lease, len(batch))
	ttls := make([]time.Duration, len(batch))
	l.mu.Lock()
	deadline := batch[0].deadline
	for i, h := range batch {
		leases[i], ttls[i] = h.lease, h.lease.TTL
		deadline = earliest(deadline, h.deadline)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	errs := l.refreshSteps(ctx, leases)
	results <- refreshResult{batch: batch, ttls: ttls, errs: errs, start: start, took: time.Since(start)}
}

// keeperState is when the keeper goroutine runs next. Guarded by l.mu,
// except that the keeper goroutine receives from timer.C without it.
type keeperState struct {
	timer *time.Timer // fires when the keeper has work (see schedule)
	at    time.Time   // when timer fires
}

// schedule makes the keeper run by at, if it would run later. Called with
// l.mu held; it does not wake the keeper goroutine unless its timer fires.
func (l *Locker) schedule(at time.Time) {
	if at.Before(l.keeper.at) {
		l.keeper.at = at
		l.keeper.timer.Reset(time.Until(at))
	}
}

// applyRefresh records a batch's outcome and puts the locks still held
// back in line for their next renewal.
func (l *Locker) applyRefresh(r refreshResult) {
	if hs := l.hooks.Load(); hs != nil {
		defer l.renewed(*hs, r) // after unlock: deferred calls run last first
	}
	now := time.Now()
	l.mu.Lock()
	defer l.unlock()
	l.stepDone()
	for i, h := range r.batch {
		err := r.err(i)
		switch {
		case h.state != active:
			// Released or lost while the batch was out.
		case err == nil:
			h.renewErr = nil
			h.extended(r.start, r.ttls[i])
			l.books.renewals.push(h)
		case errors.Is(err, driver.ErrNotHeld):
			l.lose(h, hook.LossNotHeld, errorf("%w: renewal found it held by no one or another owner", ErrLost))
		default:
			// Outcome unknown (network, timeout), or a refusal (ErrDenied,
			// ErrNoSpace) that the lease on the server outlives: try
			// again soon; the deadline closes Done, with this error in
			// its cause, if no attempt succeeds in time.
			h.renewErr = err
			h.nextRenew = now.Add(h.lease.TTL / 10)
			l.books.renewals.push(h)
			h.atRisk(err)
		}
	}
}

// applyLoss closes Done of the leases a driver reported lost: one lease
// in O(log n), or every lease in O(n) for a session-wide loss.
func (l *Locker) applyLoss(loss driver.Loss) {
	l.mu.Lock()
	defer l.unlock()
	cause := errorf("%w: %w", ErrLost, l.storeError(loss.Err))
	if loss.Owner != "" {
		if h := l.books.held[loss.Owner]; h != nil {
			l.lose(h, hook.LossReported, cause)
		}
		return
	}
	l.books.deadlines.clear()
	l.books.renewals.clear()
	for _, h := range l.books.held {
		l.lose(h, hook.LossReported, cause)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func refreshOne(l *Locker, ctx context.Context, lease driver.Lease) error {
	if l.direct(ctx) {
		return l.refreshSteps(ctx, []driver.Lease{lease})[0]
	}
	_, err := call(l, ctx, func() (struct{}, error) {
		return struct{}{}, l.refreshSteps(ctx, []driver.Lease{lease})[0]
	}, nil)
	return err
}

// refreshSteps runs the driver's Refresh of leases and returns one error per
// lease, through storeError. A driver that returns another count of results breaks its
// contract: every lease gets an error saying so (a failed step, retried
// until the lease could have run out, as a store's failure would be),
// rather than a worker indexing past the end.
func (l *Locker) refreshSteps(ctx context.Context, leases []driver.Lease) []error {
	errs := l.drv.Refresh(ctx, leases)
	if len(errs) == len(leases) {
		for i, err := range errs {
			errs[i] = l.storeError(err)
		}
		return errs
	}
	err := errorf("dlock: the backend's Refresh returned %d results for %d leases", len(errs), len(leases))
	errs = make([]error, len(leases))
	for i := range errs {
		errs[i] = err
	}
	return errs
}
