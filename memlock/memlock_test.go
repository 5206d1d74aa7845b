package memlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
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
			return backend.New(d, nil), d
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
}

// TestConformanceWithoutModes runs the suite's other branch: a backend
// without shared locks and semaphores (Harness.NoModes) must refuse them
// with ErrUnsupported.
func TestConformanceWithoutModes(t *testing.T) {
	store := memlock.NewStore()
	h := harness()
	h.LockerAndDriver = func(t testing.TB) (*dlock.Locker, driver.Driver) {
		d := store.Driver()
		return backend.New(noModes{d, d.(driver.Notifier), d.(driver.Inspector), d.(driver.ForceReleaser)}, nil), d
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
