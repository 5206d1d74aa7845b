package sqllock_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule/fencetest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
)

// openFenceSQLite opens a new SQLite database file, closed when the test
// ends.
func openFenceSQLite(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fenced.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestFenceSQLite(t *testing.T) {
	testFenceSQL(t, openFenceSQLite(t), sqllock.SQLite, "")
}

func TestFencePostgres(t *testing.T) {
	p := testserver.StartPostgres(t)
	testFenceSQL(t, p.DB(t), sqllock.PostgreSQL, "")
}

func TestFenceMariaDB(t *testing.T) {
	m := testserver.StartMariaDB(t)
	testFenceSQL(t, m.DB(t), sqllock.MySQL, "")
	// With clientFoundRows, MySQL counts rows matched rather than
	// changed: a refused upsert then reports a row too.
	cfg, err := mysql.ParseDSN(m.DSN())
	if err != nil {
		t.Fatalf("ParseDSN(%q) = %v, want nil", m.DSN(), err)
	}
	cfg.ClientFoundRows = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open %s: %v", cfg.FormatDSN(), err)
	}
	t.Cleanup(func() { db.Close() })
	t.Run("ClientFoundRows", func(t *testing.T) { testFenceSQL(t, db, sqllock.MySQL, "_found") })
}

// testFenceSQL runs the store properties on a FenceTable and on
// fence.Update over a table of the test's own, in tables named with
// suffix.
func testFenceSQL(t *testing.T, db *sql.DB, d sqllock.Dialect, suffix string) {
	table, err := sqllock.NewFenceTable(db, d, "fenced"+suffix)
	if err != nil {
		t.Fatalf("NewFenceTable(%v) = %v, want nil", d, err)
	}
	for range 2 { // Migrate twice: it must be idempotent
		if err := table.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate() = %v, want nil", err)
		}
	}
	t.Run("Table", func(t *testing.T) { fencetest.Run(t, table, "") })
	t.Run("Update", func(t *testing.T) { fencetest.Run(t, newFencedRows(t, db, d, "fenced_rows"+suffix), "") })
	t.Run("UpdateRow", func(t *testing.T) { testFenceUpdateRow(t, db, d, "accounts"+suffix) })
	t.Run("InvalidTable", func(t *testing.T) { testInvalidFenceTable(t, db, d) })
}

// testInvalidFenceTable checks that NewFenceTable refuses what it cannot
// use.
func testInvalidFenceTable(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	for _, name := range []string{"x;DROP TABLE y", "a b", `"quoted"`, "1abc", "a.b.c"} {
		if _, err := sqllock.NewFenceTable(db, d, name); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("NewFenceTable(%q) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := sqllock.NewFenceTable(db, 0, ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewFenceTable(dialect 0) = %v, want ErrInvalid", err)
	}
	if _, err := sqllock.NewFenceTable(nil, d, ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewFenceTable(nil db) = %v, want ErrInvalid", err)
	}
}

// TestFenceTableZero checks that a FenceTable not made by NewFenceTable
// refuses to work instead of panicking.
func TestFenceTableZero(t *testing.T) {
	var zero sqllock.FenceTable
	fencetest.WantInvalid(t, &zero)
	if err := zero.Migrate(t.Context()); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Migrate on a zero FenceTable = %v, want ErrInvalid", err)
	}
}
