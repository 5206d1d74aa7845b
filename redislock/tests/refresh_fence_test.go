package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// TestRefreshChecksFence: a refresh with Lease.Fence set extends the
// lease only if the owner holds the name with exactly that token, for an
// exclusive holder and a shared one alike; Fence 0 checks the owner only.
func TestRefreshChecksFence(t *testing.T) {
	client := testserver.StartRedis(t).Client(t)
	lk, d, err := testhook.New(client)
	if err != nil {
		t.Fatalf("testhook.New = %v", err)
	}
	defer lk.Close()
	for _, shared := range []bool{false, true} {
		l := driver.Lease{Name: "refresh-fence", Owner: "AAAAAAAAAAAAAAAAAAAAAA:1", TTL: time.Minute, Shared: shared}
		res, err := d.Acquire(t.Context(), l)
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%+v) = %+v, %v; want acquired", l, res, err)
		}
		for _, tc := range []struct {
			fence uint64
			want  error
		}{{res.Fence - 1, driver.ErrNotHeld}, {res.Fence + 1, driver.ErrNotHeld}, {res.Fence, nil}, {0, nil}} {
			l.Fence = tc.fence
			if err := d.Refresh(t.Context(), []driver.Lease{l})[0]; !errors.Is(err, tc.want) {
				t.Errorf("Refresh(shared %v, fence %d, holder's %d) = %v, want %v", shared, tc.fence, res.Fence, err, tc.want)
			}
		}
		if err := d.Release(t.Context(), l); err != nil {
			t.Fatalf("Release(%+v) = %v", l, err)
		}
	}
}
