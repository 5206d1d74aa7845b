package sqllock_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// testRowsPerName checks what stays on the server per name: while held,
// one row in the lease table (and one per shared holder or permit in the
// holders table); once released, the lease table's row is kept until it
// has been idle for IdleRetention, and then a Locker's acquisitions
// delete it. The adversary is a Locker that uses more new names than one
// cleanup batch (100) deletes: a few acquisitions after the retention
// must leave nothing of them, not a backlog that a cleanup a minute
// cannot keep up with.
func testRowsPerName(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	const retention = 200 * time.Millisecond
	const table = "rows_test"
	l, err := sqllock.New(db, d, &sqllock.Options{Table: table, IdleRetention: retention, ClockBound: retention})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const exclusive, shared = 300, 30
	var held []*dlock.Lock
	for i := range exclusive + shared {
		name, opts := fmt.Sprintf("rows-%d", i), []dlock.Option(nil)
		if i >= exclusive {
			opts = []dlock.Option{dlock.Shared()}
		}
		k, err := l.Acquire(ctx, name, opts...)
		if err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
		}
		held = append(held, k)
	}
	if got := countRows(t, db, table); got != exclusive+shared {
		t.Errorf("lease rows with %d names held = %d, want %d", exclusive+shared, got, exclusive+shared)
	}
	if got := countRows(t, db, table+"_holders"); got != shared {
		t.Errorf("holder rows with %d shared holds = %d, want %d", shared, got, shared)
	}
	for _, k := range held {
		if err := k.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
		}
	}
	if got := countRows(t, db, table+"_holders"); got != 0 {
		t.Errorf("holder rows after every release = %d, want 0", got)
	}
	if got := countRows(t, db, table); got != exclusive+shared {
		t.Errorf("lease rows right after release = %d, want %d (kept for IdleRetention)", got, exclusive+shared)
	}
	time.Sleep(2 * retention)
	for i := range 5 {
		k, err := l.Acquire(ctx, "tick", dlock.WithTTL(time.Second))
		if err != nil {
			t.Fatalf("Acquire(tick %d) = %v, want a lock", i, err)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatalf("Release(tick %d) = %v, want nil", i, err)
		}
	}
	if got := countRows(t, db, table); got > 1 {
		t.Errorf("lease rows after 5 acquisitions past the retention = %d, want at most 1 (tick's)", got)
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count rows of %s: %v", table, err)
	}
	return n
}
