package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/sqllock"
)

// placeholder returns how d marks parameters, for fence.Update.
func placeholder(d sqllock.Dialect) fence.Placeholder {
	if d == sqllock.PostgreSQL {
		return fence.Dollar
	}
	return fence.Question
}

// fencedRows is a store over a table of the test's own, written with
// fence.Update. The fence column may be NULL, as after ALTER TABLE ...
// ADD fence.
type fencedRows struct {
	db      *sql.DB
	d       sqllock.Dialect
	table   string
	prepare string // inserts the row (name) if missing, without a fence
	read    string // reads (fence, value) of the row (name)
}

func newFencedRows(t *testing.T, db *sql.DB, d sqllock.Dialect, table string) *fencedRows {
	t.Helper()
	r := &fencedRows{db: db, d: d, table: table}
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

func (r *fencedRows) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if resource == "" {
		return dlock.ErrInvalid
	}
	if _, err := r.db.ExecContext(ctx, r.prepare, resource); err != nil {
		return err
	}
	u := fence.Update{
		Placeholder: placeholder(r.d),
		Table:       r.table,
		Set:         []fence.Column{{Name: "value", Value: value}},
		Where:       []fence.Column{{Name: "name", Value: resource}},
	}
	return u.Exec(ctx, r.db, token)
}

func (r *fencedRows) Read(ctx context.Context, resource string) ([]byte, uint64, error) {
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

// testFenceUpdateRow checks fence.Update's own cases on a real database:
// several columns, another row left alone, a transaction rolled back, a
// missing row. (Its refusals of bad input are tested in package fence.)
func testFenceUpdateRow(t *testing.T, db *sql.DB, d sqllock.Dialect, table string) {
	ctx := t.Context()
	for _, q := range []string{
		`CREATE TABLE ` + table + ` (region VARCHAR(10) NOT NULL, id INTEGER NOT NULL, balance INTEGER NOT NULL, note VARCHAR(20) NOT NULL, version BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (region, id))`,
		`INSERT INTO ` + table + ` (region, id, balance, note) VALUES ('eu', 7, 100, ''), ('us', 7, 100, '')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("Exec(%q) = %v, want nil", q, err)
		}
	}
	eu := []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 7}}
	update := func(db fence.DB, token uint64, balance int) error {
		u := fence.Update{Placeholder: placeholder(d), Table: table, Fence: "version",
			Set: []fence.Column{{Name: "balance", Value: balance}, {Name: "note", Value: "by token"}}, Where: eu}
		return u.Exec(ctx, db, token)
	}
	wantRow := func(region string, balance int, version int64) {
		t.Helper()
		var b int
		var v int64
		q := `SELECT balance, version FROM ` + table + ` WHERE region = ? AND id = 7`
		if d == sqllock.PostgreSQL {
			q = `SELECT balance, version FROM ` + table + ` WHERE region = $1 AND id = 7`
		}
		if err := db.QueryRowContext(ctx, q, region).Scan(&b, &v); err != nil || b != balance || v != version {
			t.Fatalf("%s row = balance %d, version %d, %v, want %d, %d, nil", region, b, v, err, balance, version)
		}
	}
	if err := update(db, 10, 90); err != nil {
		t.Fatalf("Update(10) = %v, want nil", err)
	}
	if err := update(db, 9, 80); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update(9) after 10 = %v, want ErrStale", err)
	}
	wantRow("eu", 90, 10)
	wantRow("us", 100, 0) // untouched

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("BeginTx() = %v, want nil", err)
	}
	if err := update(tx, 11, 1); err != nil {
		t.Fatalf("Update(11) in a transaction = %v, want nil", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback() = %v, want nil", err)
	}
	wantRow("eu", 90, 10)

	missing := fence.Update{Placeholder: placeholder(d), Table: table, Fence: "version", Where: []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 99}}}
	if err := missing.Exec(ctx, db, 12); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Update of a missing row = %v, want sql.ErrNoRows", err)
	}
	wantRow("eu", 90, 10)
}
