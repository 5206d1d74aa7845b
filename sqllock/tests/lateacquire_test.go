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
// committed; then the blocker commits a free row. pgx closes the
// connection and sends a cancel request: if the statement still ran and
// took the name for the owner that gave up, the Locker's later release
// frees it. Either way the name must be free within seconds, not held
// for the lease's 10 minutes: WaitsLeaveNothing saw such a hold twice
// under load ("every name is free" failed).
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

	var fence int64
	if err := db.QueryRowContext(t.Context(), `SELECT fence FROM dlock_locks WHERE name = $1`, name).Scan(&fence); err == nil {
		t.Logf("fence after the blocker's commit: %d (0: the cancel request stopped the statement)", fence)
	}
	testkit.Eventually(t, "the name free after the wait gave up", func() bool {
		k, err := other.TryAcquire(t.Context(), name)
		if err != nil {
			return false
		}
		testkit.MustRelease(t, k)
		return true
	})
}
