package sqllock_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
	_ "github.com/dlock-go/dlock/sqllock/mysql"    // mysql://, sqllock.MySQL, driver "mysql"
	_ "github.com/dlock-go/dlock/sqllock/postgres" // postgres://, sqllock.PostgreSQL, driver "pgx"
)

func TestMain(m *testing.M) {
	runWorker() // returns at once unless this process is a worker
	os.Exit(m.Run())
}

// harness returns a conformance Harness on db. Every Locker shares db, like
// the goroutines of one service would.
func harness(db *sql.DB, dialect sqllock.Dialect) dlocktest.Harness {
	return withDriver(dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			t.Helper()
			l, err := sqllock.New(db, dialect, nil)
			if err != nil {
				t.Fatalf("New(%v) = %v, want a Locker", dialect, err)
			}
			return l
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			admin, err := sqllock.New(db, dialect, nil)
			if err != nil {
				t.Fatalf("New(%v) = %v, want a Locker", dialect, err)
			}
			defer admin.Close()
			if held, err := admin.ForceRelease(t.Context(), name); !held || err != nil {
				t.Fatalf("ForceRelease(%q) = %v, %v, want true, nil", name, held, err)
			}
		},
		Ping: func(ctx context.Context) error {
			var one int
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		},
		TTL: time.Second,
	}, func(t testing.TB) (*dlock.Locker, driver.Driver, error) {
		return testhook.New(db, dialect.String(), false)
	})
}

// withDriver sets h's LockerAndDriver to newLD, which makes a Locker as
// h's NewLocker does and returns the driver under it too (a testhook
// constructor); a harness that changes NewLocker calls it again.
func withDriver(h dlocktest.Harness, newLD func(t testing.TB) (*dlock.Locker, driver.Driver, error)) dlocktest.Harness {
	h.LockerAndDriver = func(t testing.TB) (*dlock.Locker, driver.Driver) {
		t.Helper()
		l, d, err := newLD(t)
		if err != nil {
			t.Fatalf("LockerAndDriver = %v, want a Locker", err)
		}
		return l, d
	}
	return h
}

// sqliteDSN is the data source name the package documents for SQLite.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=journal_size_limit(4194304)"
}

// openSQLite opens the SQLite database at path, closed when the test ends.
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newSQLite(t testing.TB) *sql.DB {
	t.Helper()
	return openSQLite(t, filepath.Join(t.TempDir(), "locks.db"))
}

// Each dialect's tests share one server (or database file), started once:
// the conformance suite first, then the other properties, then the faults
// that pause or restart the server. They do not run in parallel: the
// conformance suite checks that Close leaves no goroutine behind.

func TestMariaDB(t *testing.T) {
	m := testserver.StartMariaDB(t)
	db := m.DB(t)
	warmPool(t, db, 16)
	t.Run("Conformance", func(t *testing.T) { dlocktest.Run(t, harness(db, sqllock.MySQL)) })
	store := mysqlURL(t, m.DSN())
	testProperties(t, db, sqllock.MySQL, store)
	t.Run("OpenURL", func(t *testing.T) { testOpenURL(t, store, newLocker(t, db, sqllock.MySQL, nil)) })
	t.Run("ServerPaused", func(t *testing.T) { testServerPaused(t, m, db, sqllock.MySQL) })
	t.Run("ServerRestarted", func(t *testing.T) { testServerRestarted(t, m, db, sqllock.MySQL) })
	t.Run("Wakeups", func(t *testing.T) { testMySQLWakeups(t, db, m.DSN()) })
	t.Run("ResumeWakes", func(t *testing.T) { testMySQLResumeWakes(t, db, store) })
	t.Run("RefreshBatches", func(t *testing.T) { testRefreshBatches(t, db, m.DSN(), sqllock.MySQL) })
	t.Run("ResumeExtendTrips", func(t *testing.T) { testResumeExtendTrips(t, db, m.DSN(), sqllock.MySQL) })
}

func TestPostgres(t *testing.T) {
	p := testserver.StartPostgres(t)
	db := p.DB(t)
	t.Run("Conformance", func(t *testing.T) { dlocktest.Run(t, harness(db, sqllock.PostgreSQL)) })
	testProperties(t, db, sqllock.PostgreSQL, p.DSN())
	t.Run("OpenURL", func(t *testing.T) { testOpenURL(t, p.DSN(), newLocker(t, db, sqllock.PostgreSQL, nil)) })
	t.Run("OpenURLLibpq", func(t *testing.T) { testOpenPostgresLibpq(t, p, newLocker(t, db, sqllock.PostgreSQL, nil)) })
	t.Run("ServerPaused", func(t *testing.T) { testServerPaused(t, p, db, sqllock.PostgreSQL) })
	t.Run("ServerRestarted", func(t *testing.T) { testServerRestarted(t, p, db, sqllock.PostgreSQL) })
	t.Run("ListenerReconnects", func(t *testing.T) { testListenerReconnects(t, p, db) })
	t.Run("ListenerLostNotification", func(t *testing.T) { testListenerLostNotification(t, db) })
	t.Run("ListenerDownAtWatch", func(t *testing.T) { testListenerDownAtWatch(t, p, db) })
	t.Run("PoolOfOne", func(t *testing.T) { testPoolOfOne(t, p) })
	t.Run("RefreshBatches", func(t *testing.T) { testRefreshBatches(t, db, p.DSN(), sqllock.PostgreSQL) })
	t.Run("ResumeExtendTrips", func(t *testing.T) { testResumeExtendTrips(t, db, p.DSN(), sqllock.PostgreSQL) })
	t.Run("LateAcquireFreed", func(t *testing.T) { testLateAcquireFreed(t, db) })
	t.Run("LateAnswer", func(t *testing.T) { testLateAnswer(t, p, db) })
}

func TestSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	db := openSQLite(t, path)
	t.Run("Conformance", func(t *testing.T) { dlocktest.Run(t, harness(db, sqllock.SQLite)) })
	testProperties(t, db, sqllock.SQLite, "sqlite://"+path)
	t.Run("OpenURL", func(t *testing.T) { testOpenURL(t, "sqlite://"+path, newLocker(t, db, sqllock.SQLite, nil)) })
	t.Run("Processes", func(t *testing.T) { testProcesses(t, "sqlite://"+path) })
	t.Run("RefreshBatches", func(t *testing.T) { testRefreshBatches(t, db, sqliteDSN(path), sqllock.SQLite) })
	t.Run("ResumeExtendTrips", func(t *testing.T) { testResumeExtendTrips(t, db, sqliteDSN(path), sqllock.SQLite) })
}

// testProperties runs the properties beyond the conformance suite that
// hold on every dialect.
// store is the database's store URL (dlock.Open), for worker processes.
func testProperties(t *testing.T, db *sql.DB, d sqllock.Dialect, store string) {
	t.Run("HostileNames", func(t *testing.T) { testHostileNames(t, db, d) })
	t.Run("BadTable", func(t *testing.T) { testBadTable(t, db, d) })
	t.Run("InspectAndForceRelease", func(t *testing.T) { testInspect(t, db, d) })
	t.Run("CustomTable", func(t *testing.T) { testCustomTable(t, db, d) })
	t.Run("CleanupKeepsFencing", func(t *testing.T) { testCleanup(t, db, d) })
	t.Run("KilledHolder", func(t *testing.T) { testKilledHolder(t, db, d, store) })
	t.Run("NoMigrate", func(t *testing.T) { testNoMigrate(t, db, d, store) })
	t.Run("Modes", func(t *testing.T) { testModes(t, db, d) })
	t.Run("ClockDoubt", func(t *testing.T) { testDoubtRule(t, db, d) })
	t.Run("RefreshBatchOwnerChecked", func(t *testing.T) { testRefreshBatchOwnerChecked(t, db, d) })
	t.Run("ResumeProcesses", func(t *testing.T) { testResumeProcesses(t, db, d, store) })
	t.Run("LockDelayKilled", func(t *testing.T) { testLockDelayKilled(t, db, d, store) })
	t.Run("CheckHeld", func(t *testing.T) { testCheckHeld(t, db, d) })
}

func BenchmarkMariaDB(b *testing.B) {
	m := testserver.StartMariaDB(b)
	dlocktest.RunBenchmarks(b, harness(m.DB(b), sqllock.MySQL))
}

func BenchmarkPostgres(b *testing.B) {
	p := testserver.StartPostgres(b)
	dlocktest.RunBenchmarks(b, harness(p.DB(b), sqllock.PostgreSQL))
}

func BenchmarkSQLite(b *testing.B) {
	dlocktest.RunBenchmarks(b, harness(newSQLite(b), sqllock.SQLite))
}
