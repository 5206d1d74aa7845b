package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

// lateGrantDriver is memlock's driver behind a slow link: the reply to the
// first Acquire arrives after delay, and meanwhile the store moved on.
// The grant that reply carries lapsed unused, another owner took the name
// twice and released it, and then the store either granted the name to
// the same owner again with a new token (regrant) or let another owner
// keep it. It is the shape of issue 23's first finding.
type lateGrantDriver struct {
	driver.Driver
	store   *memlock.Store
	delay   time.Duration
	regrant bool
	queued  bool // LeaseStart is the send time (AcquireQueued's contract)

	mu        sync.Mutex
	calls     int
	refreshes []driver.Lease
}

func (d *lateGrantDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	d.mu.Lock()
	d.calls++
	n := d.calls
	d.mu.Unlock()
	start := time.Now()
	res, err := d.Driver.Acquire(ctx, l)
	if n != 1 || err != nil || !res.Acquired {
		return res, err
	}
	d.store.Expire(l.Name) // the grant lapses unused
	other := driver.Lease{Name: l.Name, Owner: "another worker", TTL: time.Hour}
	for range 2 {
		d.Driver.Acquire(ctx, other)
		d.Driver.Release(ctx, other)
	}
	if d.regrant {
		d.Driver.Acquire(ctx, l) // handed to the first owner again, a new token
	} else {
		d.Driver.Acquire(ctx, other) // and kept
	}
	time.Sleep(d.delay)
	if d.queued {
		res.LeaseStart = start
	}
	return res, nil // the lapsed grant's token
}

func (d *lateGrantDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	d.mu.Lock()
	d.refreshes = append(d.refreshes, ls...)
	d.mu.Unlock()
	return d.Driver.Refresh(ctx, ls)
}

// lateQueuer offers lateGrantDriver as a Queuer whose AcquireQueued is one
// Acquire.
type lateQueuer struct{ *lateGrantDriver }

func (q lateQueuer) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	return q.Acquire(ctx, l)
}

// A slow acquisition is confirmed against the token the store holds, not
// only the owner: the handle's Fence is the store's current token for its
// owner, never a lapsed grant's (issue 23, finding 1).
func TestSlowAcquisitionGetsTheStoresToken(t *testing.T) {
	const ttl = 10 * time.Second
	for _, queued := range []bool{false, true} {
		for _, try := range []bool{false, true} {
			if queued && try {
				continue // TryAcquire does not queue
			}
			t.Run(fmt.Sprintf("queued=%v/try=%v", queued, try), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					store := memlock.NewStore()
					d := &lateGrantDriver{Driver: store.Driver(), store: store, delay: ttl * 6 / 10, regrant: true, queued: queued}
					var l *dlock.Locker
					if queued {
						l = lockerOver(lateQueuer{d})
					} else {
						l = lockerOver(d)
					}
					defer l.Close()
					var k *dlock.Lock
					var err error
					if try {
						k, err = l.TryAcquire(t.Context(), "a", dlock.WithTTL(ttl))
					} else {
						k, err = l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
					}
					if err != nil {
						t.Fatalf("queued=%v try=%v: Acquire(%q) = %v, want a lock (the store granted it to this owner again)", queued, try, "a", err)
					}
					defer k.Release(t.Context())
					d.mu.Lock()
					t.Logf("steps to a handle: %d Acquire (the first delayed), %d Refresh", d.calls, len(d.refreshes))
					d.mu.Unlock()
					owner, fence, ok := store.Holder("a")
					if !ok || owner != k.Owner() {
						t.Fatalf("queued=%v try=%v: store holder = %q, %v, want %q", queued, try, owner, ok, k.Owner())
					}
					if got := k.Fence(); got != fence {
						t.Errorf("queued=%v try=%v: Fence() = %d, want %d, the token the store holds for the owner (1 is the lapsed grant's, 2 and 3 another owner's)", queued, try, got, fence)
					}
				})
			})
		}
	}
}

// A slow acquisition whose owner lost the name to another owner meanwhile
// is not handed out: TryAcquire reports ErrNotAcquired, a queued Acquire
// an error wrapping ErrNotHeld.
func TestSlowAcquisitionLostIsNotHandedOut(t *testing.T) {
	const ttl = 10 * time.Second
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memlock.NewStore()
				d := &lateGrantDriver{Driver: store.Driver(), store: store, delay: ttl * 6 / 10, queued: queued}
				var (
					k   *dlock.Lock
					err error
				)
				if queued {
					l := lockerOver(lateQueuer{d})
					defer l.Close()
					k, err = l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
					if !errors.Is(err, dlock.ErrNotHeld) {
						t.Errorf("queued Acquire(%q) = %v, want an error wrapping ErrNotHeld", "a", err)
					}
				} else {
					l := lockerOver(d)
					defer l.Close()
					k, err = l.TryAcquire(t.Context(), "a", dlock.WithTTL(ttl))
					if !errors.Is(err, dlock.ErrNotAcquired) {
						t.Errorf("TryAcquire(%q) = %v, want ErrNotAcquired", "a", err)
					}
				}
				if k != nil {
					t.Errorf("queued=%v: a handle with Fence %d was handed out for a name another owner holds", queued, k.Fence())
				}
				if owner, _, _ := store.Holder("a"); owner != "another worker" {
					t.Errorf("queued=%v: store holder = %q, want %q kept", queued, owner, "another worker")
				}
			})
		})
	}
}

// Every renewal of a handed-out lease carries its token, the keeper's and
// Lock.Refresh's alike, and no Takeover; release stays owner-only.
func TestRenewalsCarryTheFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		d := &recordingDriver{Driver: store.Driver()}
		l := lockerOver(d)
		defer l.Close()
		const ttl = 3 * time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", "a", err)
		}
		time.Sleep(2 * ttl) // several renewals by the keeper
		if err := k.Refresh(t.Context()); err != nil {
			t.Fatalf("Refresh(%q) = %v, want nil", "a", err)
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", "a", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.refreshes) < 4 {
			t.Fatalf("refreshes = %d in %v with TTL %v, want at least 4", len(d.refreshes), 2*ttl, ttl)
		}
		for i, r := range d.refreshes {
			if r.Fence != k.Fence() || r.Takeover != "" {
				t.Errorf("refresh %d: Lease.Fence = %d, Takeover = %q, want %d and none", i, r.Fence, r.Takeover, k.Fence())
			}
		}
		if len(d.releases) != 1 || d.releases[0].Fence != 0 {
			t.Errorf("releases = %+v, want one owner-only release (Fence 0)", d.releases)
		}
	})
}

// recordingDriver records the leases of memlock's steps.
type recordingDriver struct {
	driver.Driver
	mu        sync.Mutex
	refreshes []driver.Lease
	releases  []driver.Lease
}

func (d *recordingDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	d.mu.Lock()
	d.refreshes = append(d.refreshes, ls...)
	d.mu.Unlock()
	return d.Driver.Refresh(ctx, ls)
}

func (d *recordingDriver) Release(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	d.releases = append(d.releases, l)
	d.mu.Unlock()
	return d.Driver.Release(ctx, l)
}

// countingDriver counts memlock's steps.
type countingDriver struct {
	driver.Driver
	mu                            sync.Mutex
	acquires, refreshes, releases int
}

func (d *countingDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	d.mu.Lock()
	d.acquires++
	d.mu.Unlock()
	return d.Driver.Acquire(ctx, l)
}

func (d *countingDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	d.mu.Lock()
	d.refreshes++
	d.mu.Unlock()
	return d.Driver.Refresh(ctx, ls)
}

func (d *countingDriver) Release(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	d.releases++
	d.mu.Unlock()
	return d.Driver.Release(ctx, l)
}

// The token checks cost no step on the fast path: an uncontended
// TryAcquire or Acquire and its Release are one Acquire and one Release.
func TestFastPathSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &countingDriver{Driver: memlock.NewStore().Driver()}
		l := lockerOver(d)
		defer l.Close()
		for _, try := range []bool{false, true} {
			var k *dlock.Lock
			var err error
			if try {
				k, err = l.TryAcquire(t.Context(), "a")
			} else {
				k, err = l.Acquire(t.Context(), "a")
			}
			if err != nil {
				t.Fatalf("try=%v: Acquire(%q) = %v", try, "a", err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("try=%v: Release(%q) = %v", try, "a", err)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.acquires != 2 || d.refreshes != 0 || d.releases != 2 {
			t.Errorf("two cycles took %d Acquire, %d Refresh, %d Release steps, want 2, 0, 2", d.acquires, d.refreshes, d.releases)
		}
	})
}
