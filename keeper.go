package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// keep is the Locker's one background goroutine. It renews every held lock
// that asked for renewal, in batches (one driver.Refresh call for all locks
// due), and closes the Done of any lock whose local deadline passes before
// a renewal succeeded. It exits when Close closes l.closing, after waiting
// for its in-flight refresh.
func (l *Locker) keep() {
	defer l.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer l.keeperTimer.Stop()
	results := make(chan refreshResult, 1)
	inflight := false
	var losses <-chan driver.Loss
	if r, ok := l.drv.(driver.LossReporter); ok {
		losses = r.Losses()
	}
	for {
		now := time.Now()
		next := now.Add(time.Hour)
		var renewable []*held
		due := false
		l.mu.Lock()
		for h := range l.held {
			if !now.Before(h.deadline) {
				l.lose(h, fmt.Errorf("%w: lease of %v could not be renewed in time", ErrLost, h.lease.TTL))
				continue
			}
			next = earliest(next, h.deadline)
			if !h.renew || inflight {
				continue
			}
			renewable = append(renewable, h)
			if !now.Before(h.nextRenew) {
				due = true
			} else {
				next = earliest(next, h.nextRenew)
			}
		}
		l.keeperAt = next
		l.keeperTimer.Reset(next.Sub(now))
		l.mu.Unlock()
		// When one lock is due, renew with it every lock whose turn comes
		// within the next TTL/12 of its own: batches stay together.
		var batch []*held
		if due {
			for _, h := range renewable {
				if !now.Before(h.nextRenew.Add(-h.lease.TTL / 12)) {
					batch = append(batch, h)
				}
			}
		}
		if len(batch) > 0 {
			inflight = true
			go l.refresh(ctx, batch, results) // exits after one bounded driver call
		}
		select {
		case <-l.keeperTimer.C:
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

type refreshResult struct {
	batch []*held
	errs  []error
	start time.Time
}

// refresh renews batch with one driver call, bounded by the earliest
// deadline in it (past that the renewal is useless), and sends the outcome.
func (l *Locker) refresh(ctx context.Context, batch []*held, results chan<- refreshResult) {
	leases := make([]driver.Lease, len(batch))
	deadline := batch[0].deadline
	l.mu.Lock()
	for i, h := range batch {
		leases[i] = h.lease
		deadline = earliest(deadline, h.deadline)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	errs := l.drv.Refresh(ctx, leases)
	results <- refreshResult{batch: batch, errs: errs, start: start}
}

// schedule makes the keeper run by at, if it would run later. Called with
// l.mu held; it does not wake the keeper goroutine unless its timer fires.
func (l *Locker) schedule(at time.Time) {
	if at.Before(l.keeperAt) {
		l.keeperAt = at
		l.keeperTimer.Reset(time.Until(at))
	}
}

func (l *Locker) applyRefresh(r refreshResult) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, h := range r.batch {
		var err error
		if len(r.errs) != len(r.batch) {
			err = fmt.Errorf("driver returned %d results for %d leases", len(r.errs), len(r.batch))
		} else {
			err = r.errs[i]
		}
		switch {
		case err == nil:
			h.extended(r.start)
		case errors.Is(err, driver.ErrNotHeld):
			l.lose(h, fmt.Errorf("%w: renewal found it held by no one or another owner", ErrLost))
		case h.state == active:
			// Outcome unknown (network, timeout): try again soon; the
			// deadline closes Done if no attempt succeeds in time.
			h.nextRenew = now.Add(h.lease.TTL / 10)
		}
	}
}

// applyLoss closes Done of the leases a driver reported lost.
func (l *Locker) applyLoss(loss driver.Loss) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for h := range l.held {
		if loss.Owner == "" || loss.Owner == h.lease.Owner {
			l.lose(h, fmt.Errorf("%w: %w", ErrLost, loss.Err))
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// jitter returns a random duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2)
}
