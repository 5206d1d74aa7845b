package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redlock"
)

// TestRefreshChecksFence: a refresh that carries a token (Lease.Fence)
// extends the lease only if the masters hold it with exactly that token,
// and reports ErrNotHeld for another.
func TestRefreshChecksFence(t *testing.T) {
	cs := clients(t, addrs(startMasters(t, 3)))
	drv, err := redlock.NewDriver(cs, nil, nil)
	if err != nil {
		t.Fatalf("NewDriver = %v, want a driver", err)
	}
	t.Cleanup(func() { drv.Close() })
	l := driver.Lease{Name: "n", Owner: "o:1", TTL: 5 * time.Second}
	res, err := drv.Acquire(t.Context(), l)
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q) = %+v, %v, want acquired", l.Name, res, err)
	}
	right := l
	right.Fence = res.Fence
	if errs := drv.Refresh(t.Context(), []driver.Lease{right}); errs[0] != nil {
		t.Fatalf("Refresh(%q) with its token %d = %v, want nil", l.Name, right.Fence, errs[0])
	}
	for _, f := range []uint64{res.Fence - 1, res.Fence + 1} {
		wrong := l
		wrong.Fence = f
		if errs := drv.Refresh(t.Context(), []driver.Lease{wrong}); !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Fatalf("Refresh(%q) with token %d, held with %d = %v, want ErrNotHeld", l.Name, f, res.Fence, errs[0])
		}
	}
}
