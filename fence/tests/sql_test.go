package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
)

// openSQLite opens a new SQLite database file, closed when the test ends.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fenced.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLite(t *testing.T) {
	testSQL(t, openSQLite(t), sqllock.SQLite, "")
}

func TestPostgres(t *testing.T) {
	p := testserver.StartPostgres(t)
	testSQL(t, p.DB(t), sqllock.PostgreSQL, "")
}

func TestMariaDB(t *testing.T) {
	m := testserver.StartMariaDB(t)
	testSQL(t, m.DB(t), sqllock.MySQL, "")
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
	t.Run("ClientFoundRows", func(t *testing.T) { testSQL(t, db, sqllock.MySQL, "_found") })
}

// testSQL runs the store properties on a Table and on Update over a table
// of the test's own, in tables named with suffix.
func testSQL(t *testing.T, db *sql.DB, d sqllock.Dialect, suffix string) {
	table, err := fence.NewTable(db, d, "fenced"+suffix)
	if err != nil {
		t.Fatalf("NewTable(%v) = %v, want nil", d, err)
	}
	for range 2 { // Migrate twice: it must be idempotent
		if err := table.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate() = %v, want nil", err)
		}
	}
	t.Run("Table", func(t *testing.T) { testStore(t, table, "") })
	t.Run("Update", func(t *testing.T) { testStore(t, newRows(t, db, d, "fenced_rows"+suffix), "") })
	t.Run("UpdateRow", func(t *testing.T) { testUpdateRow(t, db, d, "accounts"+suffix) })
	t.Run("InvalidTable", func(t *testing.T) { testInvalidTable(t, db, d) })
}

// rows is a store over a table of the test's own, written with Update.
// The fence column may be NULL, as after ALTER TABLE ... ADD fence.
type rows struct {
	db      *sql.DB
	d       sqllock.Dialect
	table   string
	prepare string // inserts the row (name) if missing, without a fence
	read    string // reads (fence, value) of the row (name)
}

func newRows(t *testing.T, db *sql.DB, d sqllock.Dialect, table string) *rows {
	t.Helper()
	r := &rows{db: db, d: d, table: table}
	var ddl string
	switch d {
	case sqllock.PostgreSQL:
		ddl = `CREATE TABLE ` + table + ` (name text COLLATE "C" PRIMARY KEY, value bytea, fence bigint)`
		r.prepare = `INSERT INTO ` + table + ` (name) VALUES ($1) ON CONFLICT DO NOTHING`
		r.read = `SELECT COALESCE(fence, 0), value FROM ` + table + ` WHERE name = $1`
	case sqllock.MySQL:
		ddl = `CREATE TABLE ` + table + ` (name VARBINARY(255) PRIMARY KEY, value LONGBLOB, fence BIGINT) ENGINE=InnoDB`
		r.prepare = `INSERT IGNORE INTO ` + table + ` (name) VALUES (?)`
		r.read = `SELECT COALESCE(fence, 0), value FROM ` + table + ` WHERE name = ?`
	case sqllock.SQLite:
		ddl = `CREATE TABLE ` + table + ` (name TEXT PRIMARY KEY, value BLOB, fence INTEGER)`
		r.prepare = `INSERT OR IGNORE INTO ` + table + ` (name) VALUES (?)`
		r.read = `SELECT COALESCE(fence, 0), value FROM ` + table + ` WHERE name = ?`
	}
	if _, err := db.ExecContext(t.Context(), ddl); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	return r
}

func (r *rows) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if resource == "" {
		return dlock.ErrInvalid
	}
	if _, err := r.db.ExecContext(ctx, r.prepare, resource); err != nil {
		return err
	}
	u := fence.Update{
		Dialect: r.d,
		Table:   r.table,
		Set:     []fence.Column{{Name: "value", Value: value}},
		Where:   []fence.Column{{Name: "name", Value: resource}},
	}
	return u.Exec(ctx, r.db, token)
}

func (r *rows) Read(ctx context.Context, resource string) ([]byte, uint64, error) {
	var (
		token int64
		value []byte
	)
	err := r.db.QueryRowContext(ctx, r.read, resource).Scan(&token, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	return value, uint64(token), err
}

// testUpdateRow checks Update's own cases: several columns, a missing
// row, a transaction, and the input it refuses.
func testUpdateRow(t *testing.T, db *sql.DB, d sqllock.Dialect, table string) {
	ctx := t.Context()
	mustExec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("Exec(%q) = %v, want nil", query, err)
		}
	}
	mustExec(`CREATE TABLE ` + table + ` (region VARCHAR(10) NOT NULL, id INTEGER NOT NULL, balance INTEGER NOT NULL, note VARCHAR(20) NOT NULL, version BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (region, id))`)
	mustExec(`INSERT INTO ` + table + ` (region, id, balance, note) VALUES ('eu', 7, 100, ''), ('us', 7, 100, '')`)
	update := func(token uint64, balance int) error {
		u := fence.Update{
			Dialect: d,
			Table:   table,
			Fence:   "version",
			Set:     []fence.Column{{Name: "balance", Value: balance}, {Name: "note", Value: "by token"}},
			Where:   []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 7}},
		}
		return u.Exec(ctx, db, token)
	}
	balance := func(region string) (int, int64) {
		t.Helper()
		var b int
		var v int64
		q := `SELECT balance, version FROM ` + table + ` WHERE region = ? AND id = 7`
		if d == sqllock.PostgreSQL {
			q = `SELECT balance, version FROM ` + table + ` WHERE region = $1 AND id = 7`
		}
		if err := db.QueryRowContext(ctx, q, region).Scan(&b, &v); err != nil {
			t.Fatalf("read balance: %v", err)
		}
		return b, v
	}
	if err := update(10, 90); err != nil {
		t.Fatalf("Update(10) = %v, want nil", err)
	}
	if err := update(9, 80); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(9) after 10 = %v, want ErrStale", err)
	}
	if b, v := balance("eu"); b != 90 || v != 10 {
		t.Fatalf("eu row = balance %d, version %d, want 90, 10", b, v)
	}
	if b, v := balance("us"); b != 100 || v != 0 {
		t.Fatalf("us row = balance %d, version %d, want 100, 0 (untouched)", b, v)
	}

	// In the caller's transaction, rolled back.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("BeginTx() = %v, want nil", err)
	}
	u := fence.Update{Dialect: d, Table: table, Fence: "version",
		Set: []fence.Column{{Name: "balance", Value: 1}}, Where: []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 7}}}
	if err := u.Exec(ctx, tx, 11); err != nil {
		t.Fatalf("Update(11) in a transaction = %v, want nil", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback() = %v, want nil", err)
	}
	if b, v := balance("eu"); b != 90 || v != 10 {
		t.Fatalf("eu row after rollback = balance %d, version %d, want 90, 10", b, v)
	}

	missing := fence.Update{Dialect: d, Table: table, Fence: "version", Where: []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 99}}}
	if err := missing.Exec(ctx, db, 12); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Update of a missing row = %v, want sql.ErrNoRows", err)
	}

	where := []fence.Column{{Name: "id", Value: 7}}
	for _, bad := range []fence.Update{
		{Dialect: d, Table: table},                                   // no Where
		{Dialect: d, Table: "", Where: where},                        // no table
		{Dialect: d, Table: table + "; DROP TABLE x", Where: where},  // not an identifier
		{Dialect: d, Table: table, Fence: "version--", Where: where}, // bad fence column
		{Dialect: d, Table: table, Set: []fence.Column{{Name: "a b", Value: 1}}, Where: where},
		{Dialect: d, Table: table, Set: []fence.Column{{Name: "fence", Value: 1}}, Where: where}, // sets the fence
		{Dialect: d, Table: table, Where: []fence.Column{{Name: "id = 7 OR 1", Value: 1}}},
		{Dialect: 0, Table: table, Where: where},
	} {
		if err := bad.Exec(ctx, db, 13); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Update%+v.Exec = %v, want ErrInvalid", bad, err)
		}
	}
	if b, v := balance("eu"); b != 90 || v != 10 {
		t.Fatalf("eu row after refused updates = balance %d, version %d, want 90, 10", b, v)
	}
}

// testInvalidTable checks that NewTable refuses what it cannot use.
func testInvalidTable(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	for _, name := range []string{"x;DROP TABLE y", "a b", `"quoted"`, "1abc", "a.b.c"} {
		if _, err := fence.NewTable(db, d, name); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("NewTable(%q) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := fence.NewTable(db, 0, ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewTable(dialect 0) = %v, want ErrInvalid", err)
	}
	if _, err := fence.NewTable(nil, d, ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewTable(nil db) = %v, want ErrInvalid", err)
	}
}
