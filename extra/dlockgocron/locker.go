package dlockgocron

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/go-co-op/gocron/v2"
)

// DefaultMinHold is LockerOptions.MinHold when it is zero.
const DefaultMinHold = 500 * time.Millisecond

// LockerOptions configures NewLocker. A nil *LockerOptions means the
// defaults.
type LockerOptions struct {
	// Prefix is put before the job's name to make the lock's name, so
	// that jobs share a store with other locks without colliding.
	// Default: "" (the job's name as it is).
	Prefix string

	// MinHold is the least time a run keeps its lock, counted from Lock:
	// Unlock of a run that took less waits out the rest before releasing.
	// A run is a tick of a job, and gocron fires a tick on every process
	// that schedules the job; a process whose clock is behind by less
	// than MinHold finds the tick's lock still taken and skips it, where
	// a lock released as soon as a fast job returned would let it run the
	// tick a second time. Choose it above the clock skew between the
	// processes (and the spread of their ticks) and below the job's
	// interval minus that skew, or the next tick finds the lock taken.
	// Negative means no minimum. Default: DefaultMinHold.
	MinHold time.Duration
}

// Locker is a gocron.Locker on a dlock.Locker. It is safe for concurrent
// use.
type Locker struct {
	l       *dlock.Locker
	prefix  string
	minHold time.Duration
	opts    []dlock.Option
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a gocron.Locker that takes each run's lock on l with
// TryAcquire, passing it opts (for example dlock.WithTTL). The lease is
// renewed while the job runs unless opts include dlock.WithoutRenewal.
// o nil means the defaults of LockerOptions.
//
// Give it to gocron.WithDistributedLocker or gocron.WithDistributedJobLocker,
// and give each job a name (gocron.WithName) that is the same in every
// process: gocron locks the job's name, which otherwise is its function's.
// A run still going when the next tick comes holds the lock, so the other
// processes skip that tick: runs of a job never overlap. gocron gives a
// run no way to learn that its lock was lost (the store unreachable for
// most of a TTL): the job goes on, and then may overlap with a run
// elsewhere.
func NewLocker(l *dlock.Locker, o *LockerOptions, opts ...dlock.Option) *Locker {
	k := &Locker{l: l, minHold: DefaultMinHold, opts: opts}
	if o != nil {
		k.prefix = o.Prefix
		switch {
		case o.MinHold < 0:
			k.minHold = 0
		case o.MinHold > 0:
			k.minHold = o.MinHold
		}
	}
	return k
}

// Lock takes the lock of one run of the job named key, without waiting: if
// another process holds it the error wraps dlock.ErrNotAcquired, and gocron
// skips the run. gocron calls it with the job's name.
func (k *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if k.l == nil {
		return nil, fmt.Errorf("dlockgocron: lock %q: nil dlock.Locker: %w", key, dlock.ErrInvalid)
	}
	start := time.Now()
	lk, err := k.l.TryAcquire(ctx, k.prefix+key, k.opts...)
	if err != nil {
		return nil, fmt.Errorf("dlockgocron: lock %q: %w", key, err)
	}
	return &runLock{k: lk, until: start.Add(k.minHold)}, nil
}

// runLock is the lock of one run.
type runLock struct {
	k     *dlock.Lock
	until time.Time // the earliest release, by the monotonic clock
}

// Unlock releases the run's lock once MinHold has passed since Lock. If
// ctx ends first (gocron's job context ends on Shutdown and on removing
// the job), it releases at once, and a process whose tick comes later may
// then run this tick again; as dlock.Lock.Release does with an ended ctx,
// it waits for the release step (bounded by a few seconds) and reports
// its outcome. The error wraps
// dlock.ErrNotHeld if the lock was lost while the job ran.
func (r *runLock) Unlock(ctx context.Context) error {
	if d := time.Until(r.until); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := r.k.Release(ctx); err != nil {
		return fmt.Errorf("dlockgocron: unlock: %w", err)
	}
	return nil
}
