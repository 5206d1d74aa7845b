package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// The backend's side of shared holds and semaphores, checked in the
// tables themselves.

func testModes(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	t.Run("ModeMismatch", func(t *testing.T) { testModeMismatch(t, db, d) })
	t.Run("ReadersRaceWriters", func(t *testing.T) { testReadersRaceWriters(t, db, d) })
	t.Run("WriterIntent", func(t *testing.T) { testWriterIntent(t, db, d) })
	t.Run("CancelledWaitsLeaveNothing", func(t *testing.T) { testCancelledWaits(t, db, d) })
	t.Run("SharedFences", func(t *testing.T) { testSharedFences(t, db, d) })
	t.Run("UpgradeOldSchema", func(t *testing.T) { testUpgradeOldSchema(t, db, d) })
	t.Run("UpgradePriorSchema", func(t *testing.T) { testUpgradePriorSchema(t, db, d) })
	t.Run("LongTableName", func(t *testing.T) { testLongTableName(t, db, d) })
}

// testLongTableName: with a table name of the longest length allowed (63
// bytes), the holders table and the indexes get names the database
// keeps whole (MySQL refuses longer ones; PostgreSQL cuts them, which
// made the holders index's name collide with its table's). On PostgreSQL
// only the holders table has an expiry index: the lease table has none,
// so that its updates stay HOT (see DESIGN.md).
func testLongTableName(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	table := "l" + stamp + "_" + strings.Repeat("x", 63-2-len(stamp)) // unique in its first 20 bytes
	opts := &sqllock.Options{Table: table}
	l := newLocker(t, db, d, opts)
	r := testkit.MustTryAcquire(t, l, testkit.UniqueName(t, "sqllock"), dlock.Shared())
	w := testkit.MustTryAcquire(t, l, testkit.UniqueName(t, "sqllock"))
	r.Release(ctx)
	w.Release(ctx)
	if d == sqllock.PostgreSQL {
		var n int
		q := `SELECT count(*) FROM pg_indexes WHERE tablename LIKE $1 AND indexdef LIKE '%(expires)'`
		if err := db.QueryRowContext(ctx, q, table[:20]+"%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d expiry indexes on %s and its holders table, want 1 (the holders table's)", n, table)
		}
	}
}

// sqlText returns q, whose only parameter is written ?, in d's syntax.
func sqlText(d sqllock.Dialect, q string) string {
	if d != sqllock.PostgreSQL {
		return q
	}
	return strings.Replace(q, "?", "$1", 1)
}

// scanOne runs q and scans its only row into dest.
func scanOne(t *testing.T, db *sql.DB, d sqllock.Dialect, q string, args []any, dest ...any) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), sqlText(d, q), args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// intentOf returns the writer intent recorded on name's row.
func intentOf(t *testing.T, db *sql.DB, d sqllock.Dialect, name string) string {
	t.Helper()
	var intent []byte
	scanOne(t, db, d, "SELECT intent FROM "+sqllock.DefaultTable+" WHERE name = ?", []any{name}, &intent)
	return string(intent)
}

// holderRows returns the fence of each row of name in the holders table,
// live or not, by owner.
func holderRows(t *testing.T, db *sql.DB, d sqllock.Dialect, name string) map[string]uint64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), sqlText(d, "SELECT owner, fence FROM "+sqllock.DefaultTable+"_holders WHERE name = ?"), name)
	if err != nil {
		t.Fatalf("holders of %q: %v", name, err)
	}
	defer rows.Close()
	m := make(map[string]uint64)
	for rows.Next() {
		var (
			owner []byte
			fence int64
		)
		if err := rows.Scan(&owner, &fence); err != nil {
			t.Fatalf("holders of %q: %v", name, err)
		}
		m[string(owner)] = uint64(fence)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("holders of %q: %v", name, err)
	}
	return m
}

// testModeMismatch: a lock is refused as a semaphore and the reverse, by
// the exclusive statement and by the transaction alike.
func testModeMismatch(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	a, b := newLocker(t, db, d, nil), newLocker(t, db, d, nil)
	sem, mutex, shared := testkit.UniqueName(t, "sqllock")+"/sem", testkit.UniqueName(t, "sqllock")+"/mutex", testkit.UniqueName(t, "sqllock")+"/shared"
	p := testkit.MustTryAcquire(t, a, sem, dlock.WithLimit(2))
	testkit.WantInvalid(t, t.Context(), b, sem, "exclusively while a permit is held")
	testkit.WantInvalid(t, t.Context(), b, sem, "shared while a permit is held", dlock.Shared())
	testkit.WantInvalid(t, t.Context(), b, sem, "with another limit", dlock.WithLimit(3))
	k := testkit.MustTryAcquire(t, a, mutex)
	testkit.WantInvalid(t, t.Context(), b, mutex, "as a semaphore while held exclusively", dlock.WithLimit(2))
	r := testkit.MustTryAcquire(t, a, shared, dlock.Shared())
	testkit.WantInvalid(t, t.Context(), b, shared, "as a semaphore while held shared", dlock.WithLimit(2))
	for _, k := range []*dlock.Lock{p, k, r} {
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", k.Name(), err)
		}
	}
	// Free again, each name takes any mode.
	testkit.MustTryAcquire(t, b, sem).Release(t.Context())
	testkit.MustTryAcquire(t, b, mutex, dlock.WithLimit(2)).Release(t.Context())
}

// testReadersRaceWriters races shared and exclusive acquisitions of one
// name from Lockers of their own (so connections of their own, as the
// pool hands them out): a reader must never hold with a writer, nor two
// writers together.
func testReadersRaceWriters(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	const workers, rounds = 6, 25
	name := testkit.UniqueName(t, "sqllock")
	var readers, writers, overlaps, writes atomic.Int32
	var wg sync.WaitGroup
	// A writer that has not written yet goes on trying after its rounds,
	// until the readers are done (then it must get the name), so that the
	// race always checks something however the machine schedules it.
	deadline := time.Now().Add(time.Minute)
	for i := range workers {
		l := newLocker(t, db, d, nil)
		wg.Go(func() {
			wrote := false
			for r := 0; r < rounds || (i%2 == 0 && !wrote && time.Now().Before(deadline)); r++ {
				write := i%2 == 0
				var opts []dlock.Option
				if !write {
					opts = append(opts, dlock.Shared())
				}
				k, err := l.TryAcquire(t.Context(), name, opts...)
				if errors.Is(err, dlock.ErrNotAcquired) {
					continue
				}
				if err != nil {
					t.Errorf("TryAcquire(%q) = %v", name, err)
					return
				}
				if write {
					wrote = true
					writes.Add(1)
					if writers.Add(1) > 1 || readers.Load() > 0 {
						overlaps.Add(1)
					}
				} else if readers.Add(1); writers.Load() > 0 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				if write {
					writers.Add(-1)
				} else {
					readers.Add(-1)
				}
				if err := k.Release(t.Context()); err != nil {
					t.Errorf("Release(%q) = %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d acquisitions of %q found a holder of the other mode (or another writer) inside", n, name)
	}
	if writes.Load() == 0 {
		t.Errorf("no writer got %q in %d tries each and a minute more: the race checked nothing", name, rounds)
	}
}

// testWriterIntent: a waiting writer behind a reader records its intent
// on the name's row; a later reader in another Locker is refused; the
// writer gets the name when the reader leaves, and that clears the intent.
func testWriterIntent(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	r1, w, r2 := newLocker(t, db, d, nil), newLocker(t, db, d, nil), newLocker(t, db, d, nil)
	name := testkit.UniqueName(t, "sqllock")
	k1 := testkit.MustTryAcquire(t, r1, name, dlock.Shared())
	got := testkit.AcquireAsync(t.Context(), w, name, dlock.WithTTL(time.Minute))
	testkit.Eventually(t, "the writer's intent on "+name, func() bool { return intentOf(t, db, d, name) != "" })
	if k, err := r2.TryAcquire(t.Context(), name, dlock.Shared()); !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			k.Release(t.Context())
		}
		t.Fatalf("TryAcquire(%q, Shared) while a writer waits = %v, want ErrNotAcquired", name, err)
	}
	if err := k1.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	kw := testkit.WantAcquired(t, got, name, 10*time.Second).Lock
	if in := intentOf(t, db, d, name); in != "" {
		t.Errorf("intent on %q after the writer took it = %q, want none", name, in)
	}
	if kw.Fence() <= k1.Fence() {
		t.Errorf("writer's fence %d, want above the reader's %d", kw.Fence(), k1.Fence())
	}
	if err := kw.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	testkit.MustTryAcquire(t, r2, name, dlock.Shared()).Release(t.Context())
}

// testCancelledWaits: a writer's wait behind readers and a wait for a
// semaphore's permit, both cancelled, leave no intent and no holder row.
func testCancelledWaits(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	r, w := newLocker(t, db, d, nil), newLocker(t, db, d, nil)
	name, sem := testkit.UniqueName(t, "sqllock"), testkit.UniqueName(t, "sqllock")+"/sem"
	k := testkit.MustTryAcquire(t, r, name, dlock.Shared())
	p := testkit.MustTryAcquire(t, r, sem, dlock.WithLimit(1))

	ctx, cancel := context.WithCancel(t.Context())
	gotW := testkit.AcquireAsync(ctx, w, name, dlock.WithTTL(time.Hour))
	gotP := testkit.AcquireAsync(ctx, w, sem, dlock.WithLimit(1), dlock.WithTTL(time.Hour))
	testkit.Eventually(t, "the writer's intent on "+name, func() bool { return intentOf(t, db, d, name) != "" })
	time.Sleep(100 * time.Millisecond) // the permit's waiter has tried at least once
	cancel()
	for _, got := range []<-chan testkit.Acquired{gotW, gotP} {
		if res := <-got; !errors.Is(res.Err, context.Canceled) {
			if res.Lock != nil {
				res.Lock.Release(t.Context())
			}
			t.Fatalf("cancelled Acquire = %v, want context.Canceled", res.Err)
		}
	}
	// The core takes the intent out in the background once Acquire
	// returned; the intent itself would last an hour.
	testkit.Eventually(t, "clearing of the intent of a cancelled writer on "+name, func() bool { return intentOf(t, db, d, name) == "" })
	if hs := holderRows(t, db, d, name); len(hs) != 1 || hs[k.Owner()] == 0 {
		t.Errorf("holder rows of %q = %v, want only the reader %s", name, hs, k.Owner())
	}
	if hs := holderRows(t, db, d, sem); len(hs) != 1 || hs[p.Owner()] == 0 {
		t.Errorf("holder rows of %q = %v, want only the permit %s", sem, hs, p.Owner())
	}
	k.Release(t.Context())
	p.Release(t.Context())
	if hs := holderRows(t, db, d, name); len(hs) != 0 {
		t.Errorf("holder rows of %q after its reader left = %v, want none", name, hs)
	}
}

// testSharedFences: each shared hold's token is stored with it, above the
// row's previous token; a writer after them gets a token above all.
func testSharedFences(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	name := testkit.UniqueName(t, "sqllock")
	var ks []*dlock.Lock
	var last uint64
	for range 3 {
		k := testkit.MustTryAcquire(t, newLocker(t, db, d, nil), name, dlock.Shared())
		if k.Fence() <= last {
			t.Errorf("shared hold's fence %d, want above %d", k.Fence(), last)
		}
		last = k.Fence()
		ks = append(ks, k)
	}
	hs := holderRows(t, db, d, name)
	for _, k := range ks {
		if hs[k.Owner()] != k.Fence() {
			t.Errorf("stored fence of holder %s = %d, want %d", k.Owner(), hs[k.Owner()], k.Fence())
		}
	}
	var rowFence int64
	scanOne(t, db, d, "SELECT fence FROM "+sqllock.DefaultTable+" WHERE name = ?", []any{name}, &rowFence)
	if uint64(rowFence) != last {
		t.Errorf("row fence of %q = %d, want the last token issued, %d", name, rowFence, last)
	}
	for _, k := range ks {
		k.Release(t.Context())
	}
	w := testkit.MustTryAcquire(t, newLocker(t, db, d, nil), name)
	if w.Fence() <= last {
		t.Errorf("writer's fence %d, want above the readers' %d", w.Fence(), last)
	}
	w.Release(t.Context())
}

// oldSchema is the lease table of the release before shared holds.
var oldSchema = map[sqllock.Dialect]string{
	sqllock.MySQL: "CREATE TABLE %s (name VARBINARY(255) NOT NULL PRIMARY KEY, owner VARBINARY(255) NOT NULL, fence BIGINT NOT NULL, " +
		"expires DATETIME(6) NOT NULL, meta VARBINARY(1024) NOT NULL DEFAULT '', KEY %[1]s_expires (expires)) ENGINE=InnoDB",
	sqllock.PostgreSQL: `CREATE TABLE %s (name text COLLATE "C" PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL, expires timestamptz NOT NULL, meta text NOT NULL DEFAULT '')`,
	sqllock.SQLite:     `CREATE TABLE %s (name TEXT NOT NULL PRIMARY KEY, owner TEXT NOT NULL, fence INTEGER NOT NULL, expires INTEGER NOT NULL, meta TEXT NOT NULL DEFAULT '') WITHOUT ROWID`,
}

// testUpgradeOldSchema: a table made by the previous release, holding a
// lock, is upgraded on first use; the old lock is kept and the new modes
// work.
func testUpgradeOldSchema(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	table := "old_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, fmt.Sprintf(oldSchema[d], table)); err != nil {
		t.Fatalf("create old table: %v", err)
	}
	t.Cleanup(func() {
		db.ExecContext(context.Background(), "DROP TABLE "+table)
		db.ExecContext(context.Background(), "DROP TABLE "+table+"_holders")
	})
	opts := &sqllock.Options{Table: table}
	// A lock taken through the old schema (the statements are the same).
	old := testkit.UniqueName(t, "sqllock") + "/old"
	var fence int64 = 42
	insert := map[sqllock.Dialect]string{
		sqllock.MySQL:      "INSERT INTO " + table + " VALUES (?, 'someone:1', ?, TIMESTAMPADD(SECOND, 60, UTC_TIMESTAMP(6)), '')",
		sqllock.PostgreSQL: "INSERT INTO " + table + " VALUES ($1, 'someone:1', $2, clock_timestamp() + interval '60 seconds', '')",
		sqllock.SQLite:     "INSERT INTO " + table + " VALUES (?, 'someone:1', ?, CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + 60000000, '')",
	}[d]
	if _, err := db.ExecContext(ctx, insert, old, fence); err != nil {
		t.Fatalf("insert an old lock: %v", err)
	}
	// Opened without migrating, the old table is not taken for empty:
	// Inspect and TryAcquire say to migrate.
	noMigrate := newLocker(t, db, d, &sqllock.Options{Table: table, NoMigrate: true})
	if hs, err := noMigrate.Inspect(ctx); err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Inspect() of an old table with NoMigrate = %+v, %v; want an error saying to migrate", hs, err)
	}
	if k, err := noMigrate.TryAcquire(ctx, testkit.UniqueName(t, "sqllock")); err == nil || !strings.Contains(err.Error(), "Migrate") {
		if k != nil {
			k.Release(ctx)
		}
		t.Fatalf("TryAcquire on an old table with NoMigrate = %v, want an error saying to migrate", err)
	}
	l := newLocker(t, db, d, opts)
	testkit.WantNotAcquired(t, l, old, "while another owner holds it")
	name := testkit.UniqueName(t, "sqllock")
	r := testkit.MustTryAcquire(t, l, name, dlock.Shared())
	testkit.WantNotAcquired(t, newLocker(t, db, d, opts), name, "while another owner holds it")
	hs, err := l.Inspect(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("Inspect() on the upgraded table = %+v, %v, want the old lock and the reader", hs, err)
	}
	r.Release(ctx)
	// Migrate on an upgraded table changes nothing.
	if err := sqllock.Migrate(ctx, db, d, table); err != nil {
		t.Fatalf("Migrate(%q) on an upgraded table = %v", table, err)
	}
}
