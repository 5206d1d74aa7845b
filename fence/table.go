package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// DefaultTable is the table a Table uses when given no name.
const DefaultTable = "dlock_fenced"

// Table is a SQL table of fenced values: one row per resource with the
// highest token that has written it. It is safe for concurrent use.
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
type Table struct {
	db    *sql.DB
	name  string
	ddl   string
	write string
	read  string
	mysql bool
}

// identifier is a plain SQL identifier, optionally qualified by a schema.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// NewTable returns a Table named table (DefaultTable if empty) in db,
// which must be opened with the driver matching dialect (see
// sqllock.Dialect). The table must exist: see Migrate. NewTable returns an
// error wrapping dlock.ErrInvalid if table is not a plain identifier or
// dialect is unknown.
func NewTable(db *sql.DB, dialect sqllock.Dialect, table string) (*Table, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("fence: table name %q is not a plain identifier: %w", table, dlock.ErrInvalid)
	}
	if db == nil {
		return nil, fmt.Errorf("fence: nil *sql.DB: %w", dlock.ErrInvalid)
	}
	t := &Table{db: db, name: table}
	switch dialect {
	case sqllock.PostgreSQL:
		t.ddl = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name  text COLLATE "C" PRIMARY KEY,
	fence bigint NOT NULL,
	value bytea NOT NULL
)`
		t.write = `INSERT INTO ` + table + ` AS f (name, fence, value) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, value = excluded.value
WHERE f.fence <= excluded.fence`
		t.read = `SELECT fence, value FROM ` + table + ` WHERE name = $1`
	case sqllock.SQLite:
		t.ddl = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name  TEXT NOT NULL PRIMARY KEY,
	fence INTEGER NOT NULL,
	value BLOB NOT NULL
) WITHOUT ROWID`
		t.write = `INSERT INTO ` + table + ` (name, fence, value) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, value = excluded.value
WHERE fence <= excluded.fence`
		t.read = `SELECT fence, value FROM ` + table + ` WHERE name = ?`
	case sqllock.MySQL:
		t.mysql = true
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
		return nil, fmt.Errorf("fence: unknown SQL dialect %d: %w", dialect, dlock.ErrInvalid)
	}
	return t, nil
}

// Migrate creates the table if it does not exist.
func (t *Table) Migrate(ctx context.Context) error {
	if _, err := t.db.ExecContext(ctx, t.ddl); err != nil {
		return fmt.Errorf("fence: create table %s: %w", t.name, err)
	}
	return nil
}

// Write stores value for resource if token is not below the token stored
// with it, in one statement. A stale token is refused with an error
// wrapping ErrStale and changes nothing. A nil value is stored as empty.
func (t *Table) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if err := checkWrite(resource, token); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	res, err := t.db.ExecContext(ctx, t.write, resource, int64(token), value)
	if err != nil {
		return fmt.Errorf("fence: write %q to %s: %w", resource, t.name, err)
	}
	if t.mysql {
		stored, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("fence: write %q to %s: %w", resource, t.name, err)
		}
		if stored != 0 {
			return stale(resource, token, uint64(stored))
		}
		return nil
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: write %q to %s: %w", resource, t.name, err)
	}
	if n == 0 {
		// Refused: read the token that refused it, for the error.
		_, stored, err := t.Read(ctx, resource)
		if err != nil {
			return fmt.Errorf("fence: write %q: %w: %w", resource, ErrStale, err)
		}
		if stored <= token {
			// Only a row deleted or lowered by hand meanwhile does this.
			return fmt.Errorf("fence: write %q: refused, then found token %d, not above %d: changed concurrently", resource, stored, token)
		}
		return stale(resource, token, stored)
	}
	return nil
}

// Read returns the value and token stored for resource. A resource never
// written reads as a nil value and token 0.
func (t *Table) Read(ctx context.Context, resource string) (value []byte, token uint64, err error) {
	var fence int64
	err = t.db.QueryRowContext(ctx, t.read, resource).Scan(&fence, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fence: read %q from %s: %w", resource, t.name, err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, uint64(max(fence, 0)), nil
}
