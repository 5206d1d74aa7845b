package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// testLateAcquireFreed is dlocktest's LateAcquireFreed on a real
// PostgreSQL, with the server's own way of running a statement late: a
// wait gives up while its acquire statement waits at the server for
// another transaction, which inserted the name's row and has not
// committed. The Locker leaves the statement to finish (for up to
// cleanupTimeout after its caller gave up) instead of closing the
// connection; the blocker commits a free row, the statement takes the
// name for the owner that gave up, and the Locker frees it at once, not
// after the lease's 10 minutes.
//
// Before that, pgx ended the statement on the caller's cancel by a cancel
// request sent after closing the connection: here the statement was
// cancelled (fence 0 stayed), but a statement that ran before the cancel
// request arrived kept the name for its whole lease, which
// WaitsLeaveNothing saw twice under load ("every name is free" failed).
func testLateAcquireFreed(t *testing.T, db *sql.DB) {
	l, other := newLocker(t, db, sqllock.PostgreSQL, nil), newLocker(t, db, sqllock.PostgreSQL, nil)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, l, "late-acquire-warm")) // the table exists
	name := "late-acquire"

	blocker, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatalf("BeginTx = %v, want nil", err)
	}
	defer blocker.Rollback()
	if _, err := blocker.ExecContext(t.Context(), `INSERT INTO dlock_locks (name, owner, fence, expires) VALUES ($1, '', 0, now())`, name); err != nil {
		t.Fatalf("insert the blocking row: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		k, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Minute))
		if k != nil {
			err = errors.New("Acquire took the name with its row locked by an uncommitted insert")
		}
		done <- err
	}()
	testkit.Eventually(t, "the acquire statement waits at the server for the blocker", func() bool {
		var n int
		err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_locks%'`).Scan(&n)
		return err == nil && n > 0
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after its context was cancelled = %v, want context.Canceled", err)
	}
	if err := blocker.Commit(); err != nil {
		t.Fatalf("commit the blocker: %v", err)
	}

	// The late statement did take the name (the blocker wrote fence 0)...
	testkit.Eventually(t, "the late acquire statement ran", func() bool {
		var fence int64
		err := db.QueryRowContext(t.Context(), `SELECT fence FROM dlock_locks WHERE name = $1`, name).Scan(&fence)
		return err == nil && fence > 0
	})
	// ...and the Locker freed it, long before the 10-minute lease.
	testkit.Eventually(t, "the late acquisition freed", func() bool {
		k, err := other.TryAcquire(t.Context(), name)
		if err != nil {
			return false
		}
		testkit.MustRelease(t, k)
		return true
	})
}
