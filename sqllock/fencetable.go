package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule"
)

// DefaultFenceTable is the table a FenceTable uses when given no name.
const DefaultFenceTable = "dlock_fenced"

// fencePrefix starts the error messages of FenceTable.
const fencePrefix = "sqllock: fence table"

// FenceTable is a SQL table of fenced values (see package fence for the
// rule): one row per resource with the highest token that has written it.
// It is safe for concurrent use. A FenceTable needs no Locker: the tokens
// may come from any dlock backend, as long as one lock guards the
// resource. To fence rows of a table of your own, use fence.Update.
//
// Write is one statement that inserts the row or updates it only if the
// token is not below the stored one, so concurrent writers are decided by
// the database's row lock, not by the client:
//
//	-- PostgreSQL (SQLite the same with ? and without the alias)
//	INSERT INTO dlock_fenced AS f (name, fence, value) VALUES ($1, $2, $3)
//	ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, value = excluded.value
//	WHERE f.fence <= excluded.fence
//
//	-- MySQL and MariaDB
//	INSERT INTO dlock_fenced (name, fence, value) VALUES (?, ?, ?)
//	ON DUPLICATE KEY UPDATE
//		value = IF(fence <= VALUES(fence), VALUES(value), value),
//		fence = IF(fence <= VALUES(fence), VALUES(fence), LAST_INSERT_ID(fence))
//
// PostgreSQL and SQLite report a refused write as no row changed. MySQL
// counts rows differently depending on the driver's clientFoundRows
// setting, so a refused write instead sets LAST_INSERT_ID to the stored
// token, which the server returns with the result; a table without an
// AUTO_INCREMENT column otherwise returns 0 there. (Tested on MariaDB
// 10.11; MySQL 8.0.20 and later deprecate VALUES() here but accept it.)
//
// The schema, created by Migrate:
//
//	-- PostgreSQL
//	CREATE TABLE IF NOT EXISTS dlock_fenced (
//		name  text COLLATE "C" PRIMARY KEY,
//		fence bigint NOT NULL,
//		value bytea NOT NULL
//	)
//
//	-- MySQL and MariaDB (names up to 255 bytes)
//	CREATE TABLE IF NOT EXISTS dlock_fenced (
//		name  VARBINARY(255) NOT NULL PRIMARY KEY,
//		fence BIGINT NOT NULL,
//		value LONGBLOB NOT NULL
//	) ENGINE=InnoDB
//
//	-- SQLite
//	CREATE TABLE IF NOT EXISTS dlock_fenced (
//		name  TEXT NOT NULL PRIMARY KEY,
//		fence INTEGER NOT NULL,
//		value BLOB NOT NULL
//	) WITHOUT ROWID
type FenceTable struct {
	db    *sql.DB
	name  string
	ddl   string
	write string
	read  string
	mysql bool
}

// NewFenceTable returns a FenceTable named table (DefaultFenceTable if
// empty) in db, which must be opened with the driver matching dialect.
// The table must exist: see Migrate. NewFenceTable returns an error
// wrapping dlock.ErrInvalid if db is nil, table is not a plain identifier
// (optionally schema.table) or dialect is unknown.
func NewFenceTable(db *sql.DB, dialect Dialect, table string) (*FenceTable, error) {
	if table == "" {
		table = DefaultFenceTable
	}
	if !fencerule.PlainName(table, true) {
		return nil, fmt.Errorf("%s: name %q is not a plain identifier: %w", fencePrefix, table, dlock.ErrInvalid)
	}
	if db == nil {
		return nil, fmt.Errorf("%s: nil *sql.DB: %w", fencePrefix, dlock.ErrInvalid)
	}
	t := &FenceTable{db: db, name: table, mysql: dialect == MySQL}
	switch dialect {
	case PostgreSQL:
		t.ddl = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name  text COLLATE "C" PRIMARY KEY,
	fence bigint NOT NULL,
	value bytea NOT NULL
)`
		t.write = `INSERT INTO ` + table + ` AS f (name, fence, value) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, value = excluded.value
WHERE f.fence <= excluded.fence`
		t.read = `SELECT fence, value FROM ` + table + ` WHERE name = $1`
	case SQLite:
		t.ddl = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name  TEXT NOT NULL PRIMARY KEY,
	fence INTEGER NOT NULL,
	value BLOB NOT NULL
) WITHOUT ROWID`
		t.write = `INSERT INTO ` + table + ` (name, fence, value) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, value = excluded.value
WHERE fence <= excluded.fence`
		t.read = `SELECT fence, value FROM ` + table + ` WHERE name = ?`
	case MySQL:
		t.ddl = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name  VARBINARY(255) NOT NULL PRIMARY KEY,
	fence BIGINT NOT NULL,
	value LONGBLOB NOT NULL
) ENGINE=InnoDB`
		// value is assigned first: MySQL assigns left to right, and the
		// second IF must still see the old fence.
		t.write = `INSERT INTO ` + table + ` (name, fence, value) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE
	value = IF(fence <= VALUES(fence), VALUES(value), value),
	fence = IF(fence <= VALUES(fence), VALUES(fence), LAST_INSERT_ID(fence))`
		t.read = `SELECT fence, value FROM ` + table + ` WHERE name = ?`
	default:
		return nil, fmt.Errorf("%s: unknown SQL dialect %d: %w", fencePrefix, dialect, dlock.ErrInvalid)
	}
	return t, nil
}

// ready returns an error wrapping dlock.ErrInvalid for a FenceTable not
// made by NewFenceTable.
func (t *FenceTable) ready() error {
	if t == nil || t.db == nil {
		return fmt.Errorf("%s: not made by NewFenceTable: %w", fencePrefix, dlock.ErrInvalid)
	}
	return nil
}

// Migrate creates the table if it does not exist.
func (t *FenceTable) Migrate(ctx context.Context) error {
	if err := t.ready(); err != nil {
		return err
	}
	if _, err := t.db.ExecContext(ctx, t.ddl); err != nil {
		return fmt.Errorf("%s: create %s: %w", fencePrefix, t.name, err)
	}
	return nil
}

// Write stores value for resource if token is not below the token stored
// with it, in one statement. A stale token is refused with an error
// wrapping fence.ErrStale and changes nothing. A nil value is stored as
// empty.
func (t *FenceTable) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if err := fencerule.CheckWrite(fencePrefix, resource, token); err != nil {
		return err
	}
	if err := t.ready(); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	res, err := t.db.ExecContext(ctx, t.write, resource, int64(token), value)
	if err != nil {
		return fmt.Errorf("%s: write %q to %s: %w", fencePrefix, resource, t.name, err)
	}
	if t.mysql {
		stored, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("%s: write %q to %s: %w", fencePrefix, resource, t.name, err)
		}
		if stored != 0 {
			return fencerule.Stale(fencePrefix, resource, token, uint64(stored))
		}
		return nil
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: write %q to %s: %w", fencePrefix, resource, t.name, err)
	}
	if n > 0 {
		return nil
	}
	// Refused: read the token that refused it, for the error.
	_, stored, err := t.Read(ctx, resource)
	if err != nil {
		return fmt.Errorf("%s: write %q: %w: %w", fencePrefix, resource, fencerule.ErrStale, err)
	}
	if stored <= token {
		// Only a row deleted or lowered by hand meanwhile does this.
		return fmt.Errorf("%s: write %q: refused, then found token %d, not above %d: changed concurrently", fencePrefix, resource, stored, token)
	}
	return fencerule.Stale(fencePrefix, resource, token, stored)
}

// Read returns the value and token stored for resource. A resource never
// written reads as a nil value and token 0.
func (t *FenceTable) Read(ctx context.Context, resource string) (value []byte, token uint64, err error) {
	if err := t.ready(); err != nil {
		return nil, 0, err
	}
	var fence int64
	err = t.db.QueryRowContext(ctx, t.read, resource).Scan(&fence, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read %q from %s: %w", fencePrefix, resource, t.name, err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, uint64(max(fence, 0)), nil
}
