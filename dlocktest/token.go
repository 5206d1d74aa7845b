package dlocktest

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// testRefreshChecksToken checks driver.Lease.Fence on Refresh: the core
// sends the token with every renewal, so that a token the store no longer
// holds for an owner (a grant that lapsed before the owner was granted
// the name again) is refused rather than taken for the current one.
func testRefreshChecksToken(t *testing.T, h Harness) {
	if h.LockerAndDriver == nil {
		t.Skip("Harness.LockerAndDriver is not set")
	}
	l, d := h.LockerAndDriver(t)
	t.Cleanup(func() { l.Close() })
	other := newLocker(t, h)
	name, ttl := uniqueName(t, ""), h.ttl()
	k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(ttl))
	lease := driver.Lease{Name: name, Owner: k.Owner(), TTL: ttl}
	for _, fence := range []uint64{k.Fence() + 1, k.Fence() - 1} {
		if fence == 0 {
			continue
		}
		lease.Fence = fence
		if errs := d.Refresh(t.Context(), []driver.Lease{lease}); len(errs) != 1 || !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Errorf("Refresh(%q, Fence %d) of a lease held with token %d = %v, want [ErrNotHeld]", name, fence, k.Fence(), errs)
		}
	}
	if testkit.IsClosed(k.Done()) {
		t.Fatalf("Done closed after a refused refresh (%v), want the lock still held", k.Context().Err())
	}
	testkit.WantNotAcquired(t, other, name, "after a refresh with another token was refused")
	for _, fence := range []uint64{k.Fence(), 0} {
		lease.Fence = fence
		if errs := d.Refresh(t.Context(), []driver.Lease{lease}); len(errs) != 1 || errs[0] != nil {
			t.Errorf("Refresh(%q, Fence %d) of a lease held with token %d = %v, want [nil]", name, fence, k.Fence(), errs)
		}
	}
	testkit.MustRelease(t, k)
}
