package sqllock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// refreshBatchTTL is the lease of the batched-refresh tests: long enough
// that no lease ends while they run.
const refreshBatchTTL = 30 * time.Second

// multiLeases acquires n leases through drv, alternately shared holds and
// permits of semaphores of 3, each on a name of its own under prefix, and
// returns them with their tokens.
func multiLeases(t *testing.T, drv driver.Driver, prefix string, n int) []driver.Lease {
	t.Helper()
	ls := make([]driver.Lease, n)
	for i := range ls {
		l := driver.Lease{Name: fmt.Sprintf("%s/%d", prefix, i), Owner: fmt.Sprintf("batchowner%014d:1", i), TTL: refreshBatchTTL}
		if i%2 == 0 {
			l.Shared = true
		} else {
			l.Limit = 3
		}
		res, err := drv.Acquire(t.Context(), l)
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%q, shared %v, limit %d) = %+v, %v, want acquired", l.Name, l.Shared, l.Limit, res, err)
		}
		l.Fence = res.Fence
		ls[i] = l
	}
	return ls
}

// testRefreshBatches checks that shared holds and permits are renewed in
// one transaction per batch, not one each. The adversary is a Locker
// holding many of them: before batching, 150 leases cost 150
// transactions of 5 round trips. Round trips are counted by a pool that
// wraps the database's driver, so the count is the client's, on every
// dialect.
func testRefreshBatches(t *testing.T, db *sql.DB, dsn string, d sqllock.Dialect) {
	counted, trips := countedDB(t, db, dsn)
	l, drv, err := testhook.New(counted, d.String(), false)
	if err != nil {
		t.Fatalf("testhook.New(%v) = %v", d, err)
	}
	defer l.Close()
	ls := multiLeases(t, drv, testkit.UniqueName(t, "batch"), 150)
	refresh := func(ls []driver.Lease) int64 {
		t.Helper()
		before := trips.Load()
		for i, err := range drv.Refresh(t.Context(), ls) {
			if err != nil {
				t.Fatalf("Refresh(%d leases)[%d] (%q) = %v, want nil", len(ls), i, ls[i].Name, err)
			}
		}
		return trips.Load() - before
	}
	small, large := refresh(ls[:10]), refresh(ls)
	t.Logf("%v: Refresh of 10 shared holds and permits: %d round trips; of 150: %d", d, small, large)
	if large != small || large > 10 {
		t.Errorf("Refresh of 150 shared holds and permits = %d round trips, of 10 = %d; want the same, at most 10 (one transaction per batch)", large, small)
	}
}

// testRefreshBatchOwnerChecked checks that a batch renews each lease only
// for its owner and token. The adversaries: a permit whose lease ended
// and that another owner took, and a lease renewed with a stale token;
// the others of the batch renew (with their tokens, or one without), and
// the summary row of a shared name moves with its holders.
func testRefreshBatchOwnerChecked(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	l, drv, err := testhook.New(db, d.String(), false)
	if err != nil {
		t.Fatalf("testhook.New(%v) = %v", d, err)
	}
	defer l.Close()
	prefix := testkit.UniqueName(t, "batch")
	ls := multiLeases(t, drv, prefix, 6)
	lost := driver.Lease{Name: prefix + "/one", Owner: "lostownerAAAAAAAAAAAAAAA:1", TTL: refreshBatchTTL, Limit: 1}
	res, err := drv.Acquire(ctx, lost)
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q, limit 1) = %+v, %v, want acquired", lost.Name, res, err)
	}
	lost.Fence = res.Fence
	setExpired(t, db, d, lost.Name, time.Hour, true)
	taker := driver.Lease{Name: lost.Name, Owner: "takerBBBBBBBBBBBBBBBBBBB:1", TTL: refreshBatchTTL, Limit: 1}
	if res, err := drv.Acquire(ctx, taker); err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q) by another owner after the permit's lease ended = %+v, %v, want acquired", taker.Name, res, err)
	}
	takerFence := holderRows(t, db, d, lost.Name)[taker.Owner]
	// The shared hold of ls[0] and its row end in a second: renewed, both
	// must last the TTL again.
	setExpired(t, db, d, ls[0].Name, -time.Second, true)
	setExpired(t, db, d, ls[0].Name, -time.Second, false)
	stale := ls[1]
	stale.Fence++
	ls[2].Fence = 0 // no token: renewed for its owner alone, beside the leases checked with theirs
	batch := append([]driver.Lease{lost, stale}, ls...)
	errs := drv.Refresh(ctx, batch)
	for i, err := range errs {
		want := error(nil)
		if i < 2 {
			want = driver.ErrNotHeld
		}
		if !errors.Is(err, want) {
			t.Errorf("Refresh(batch)[%d] (%q, owner %s, token %d) = %v, want %v", i, batch[i].Name, batch[i].Owner, batch[i].Fence, err, want)
		}
	}
	if got := holderRows(t, db, d, lost.Name); len(got) != 1 || got[taker.Owner] != takerFence {
		t.Errorf("holders of %q after the lost lease's renewal = %v, want only %s with token %d", lost.Name, got, taker.Owner, takerFence)
	}
	writer := driver.Lease{Name: ls[0].Name, Owner: "writerCCCCCCCCCCCCCCCCCC:1", TTL: refreshBatchTTL}
	res, err = drv.Acquire(ctx, writer)
	if err != nil || res.Acquired || res.Remaining < refreshBatchTTL/2 {
		t.Errorf("Acquire(%q) as a lock after its shared hold's renewal = %+v, %v, want not acquired, about %v remaining", writer.Name, res, err, refreshBatchTTL)
	}
}
