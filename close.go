package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// closeState is how Close reaches the Locker's goroutines and the calls
// under way: a signal they watch, and the counts Close waits for.
type closeState struct {
	closingCtx context.Context         // done once Close begins
	closeNow   context.CancelCauseFunc // begins Close (cause ErrClosed): wakes waiters, stops the keeper
	closing    <-chan struct{}         // closingCtx.Done()
	bg         sync.WaitGroup          // goroutines the Locker started (keeper, workers, observers)
	acquiring  sync.WaitGroup          // Acquire calls under way; Add only with l.mu held and !l.closed
}

// Close stops the Locker's background work, releases every lock it holds
// (their Context's cause becomes ErrClosed), makes waiting Acquire calls
// return ErrClosed, and closes the driver. An Acquire whose step is under
// way when Close begins returns ErrClosed and releases what that step
// took before Close returns. Nothing stays held after Close returns,
// unless the store could not be reached within a few seconds: then those
// leases end by their TTL. Later calls return ErrClosed.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errorf("dlock: close: %w", ErrClosed)
	}
	l.closed = true
	l.pool.close()
	all := make([]*held, 0, len(l.books.held))
	for _, h := range l.books.held {
		all = append(all, h)
	}
	for _, h := range all {
		l.forget(h, closed)
		h.cancelHandles(ErrClosed)
	}
	l.mu.Unlock()
	l.closeNow(ErrClosed)

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	hs := l.hooks.Load()
	for _, h := range all {
		start := time.Now()
		err := l.release(ctx, ownerOnly(h.lease))
		if hs != nil {
			l.released(*hs, h.values(), h, start, true, err)
		}
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			errs = append(errs, fmt.Errorf("release %s: %w", quote(h.lease.Name), err))
		}
	}
	// Acquire calls under way release what they take from now on (see
	// register); wait for them, as long as the store answers.
	acquired := make(chan struct{})
	go func() { // exits when the last Acquire under way returns
		l.acquiring.Wait()
		close(acquired)
	}()
	select {
	case <-acquired:
	case <-ctx.Done():
		errs = append(errs, errors.New("acquisitions under way did not end in time; what they took ends with its lease"))
	}
	l.bg.Wait()
	if err := l.drv.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return errorf("dlock: close: %w", err)
	}
	return nil
}

// begin counts an Acquire call under way, unless the Locker is closed.
func (l *Locker) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.acquiring.Add(1)
	return nil
}

func (l *Locker) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}
