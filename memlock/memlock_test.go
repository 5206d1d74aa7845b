package memlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

func harness() dlocktest.Harness {
	store := memlock.NewStore()
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := memlock.New(store)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Expire: func(t testing.TB, name string) {
			if !store.Expire(name) {
				t.Fatalf("Expire(%q): not held", name)
			}
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			d := store.Driver()
			return dlock.NewLocker(d, driver.LockerOptions{}), d
		},
		TTL: 300 * time.Millisecond,
	}
}

func TestConformance(t *testing.T) {
	dlocktest.Run(t, harness())
}

func BenchmarkMemlock(b *testing.B) {
	dlocktest.RunBenchmarks(b, harness())
}

// noModes hides memlock's shared locks and semaphores, as a backend
// without them would be.
type noModes struct {
	driver.Driver
	driver.Notifier
	driver.Inspector
	driver.ForceReleaser
	driver.Extender
	driver.Resumer
	driver.LockDelayer
}

// TestConformanceWithoutModes runs the suite's other branch: a backend
// without shared locks and semaphores (Harness.NoModes) must refuse them
// with ErrUnsupported.
func TestConformanceWithoutModes(t *testing.T) {
	store := memlock.NewStore()
	h := harness()
	h.LockerAndDriver = func(t testing.TB) (*dlock.Locker, driver.Driver) {
		d := store.Driver()
		return dlock.NewLocker(noModes{d, d.(driver.Notifier), d.(driver.Inspector), d.(driver.ForceReleaser), d.(driver.Extender), d.(driver.Resumer), d.(driver.LockDelayer)}, driver.LockerOptions{}), d
	}
	h.NewLocker = func(t testing.TB) *dlock.Locker {
		l, _ := h.LockerAndDriver(t)
		return l
	}
	h.Expire = func(t testing.TB, name string) {
		if !store.Expire(name) {
			t.Fatalf("Expire(%q): not held", name)
		}
	}
	h.NoModes = true
	dlocktest.Run(t, h)
}

// bareDriver is memlock's driver with only the five steps every backend
// has: no notifications, no shared modes, no Inspect or ForceRelease, as
// a minimal third-party backend would be.
type bareDriver struct{ d driver.Driver }

func (b bareDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	return b.d.Acquire(ctx, l)
}
func (b bareDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	return b.d.Refresh(ctx, ls)
}
func (b bareDriver) Release(ctx context.Context, l driver.Lease) error { return b.d.Release(ctx, l) }
func (b bareDriver) Close() error                                      { return b.d.Close() }

// TestConformanceBare runs the suite on a backend with nothing but the
// required steps, which says so in its Harness (NoModes, NoAdmin): the
// suite must pass it, checking that what it lacks fails with
// ErrUnsupported. Without NoAdmin the same backend fails the suite's
// Inspect and ForceRelease properties, which used to skip.
func TestConformanceBare(t *testing.T) {
	store := memlock.NewStore()
	h := harness()
	h.NewLocker = func(t testing.TB) *dlock.Locker {
		return dlock.NewLocker(bareDriver{store.Driver()}, driver.LockerOptions{})
	}
	h.Expire = func(t testing.TB, name string) {
		if !store.Expire(name) {
			t.Fatalf("Expire(%q): not held", name)
		}
	}
	h.LockerAndDriver = func(t testing.TB) (*dlock.Locker, driver.Driver) {
		d := bareDriver{store.Driver()}
		return dlock.NewLocker(d, driver.LockerOptions{}), d
	}
	h.NoModes, h.NoAdmin, h.NoResume, h.NoExtend, h.NoLockDelay = true, true, true, true, true
	dlocktest.Run(t, h)
}
