package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// Dialect selects the SQL a Locker speaks. The *sql.DB must be opened with
// the matching driver, and the program must import the dialect's package
// (sqllock/postgres, sqllock/mysql), except for SQLite.
type Dialect int

const (
	// MySQL is MySQL 8 or MariaDB 10.3 and later (tested on MariaDB 10.11), through
	// github.com/go-sql-driver/mysql; it needs the import of
	// github.com/dlock-go/dlock/sqllock/mysql.
	MySQL Dialect = iota + 1
	// PostgreSQL is PostgreSQL 9.5 and later (tested on 15), through
	// github.com/jackc/pgx/v5/stdlib; it needs the import of
	// github.com/dlock-go/dlock/sqllock/postgres.
	PostgreSQL
	// SQLite is SQLite 3.35 and later, through modernc.org/sqlite.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case PostgreSQL:
		return "postgresql"
	case SQLite:
		return "sqlite"
	}
	return "invalid dialect"
}

// dialectPackages names the package a program imports to use each
// dialect but SQLite: the package links the dialect's driver, which
// sqllock itself does not import.
var dialectPackages = map[Dialect]string{
	MySQL:      "github.com/dlock-go/dlock/sqllock/mysql",
	PostgreSQL: "github.com/dlock-go/dlock/sqllock/postgres",
}

// linked returns an error wrapping dlock.ErrInvalid, naming the import
// to add, if dialect's package is not linked into the program.
func linked(dialect Dialect) error {
	pkg, ok := dialectPackages[dialect]
	if !ok {
		return nil
	}
	if _, ok := dialects.Lookup(dialect.String()); !ok {
		return fmt.Errorf("dialect %s is not linked (forgotten import?): import _ %q: %w", dialect, pkg, dlock.ErrInvalid)
	}
	return nil
}

// dialectNamed returns the dialect whose String is name, or 0.
func dialectNamed(name string) Dialect {
	for d := range dialectPackages {
		if d.String() == name {
			return d
		}
	}
	return 0
}

// queries are one dialect's steps on one table. Each is one statement (or
// two where noted) run on the pool.
type queries struct {
	migrate      func(ctx context.Context, db *sql.DB) error
	acquire      func(ctx context.Context, db querier, l driver.Lease) (outcome, error)
	refresh      func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]uint64, error) // the token of each lease extended
	release      func(ctx context.Context, db querier, name, owner string) (bool, error)
	forceRelease func(ctx context.Context, db querier, name string) (bool, error)

	cleanupSQL        string // deletes rows idle (and without an intent) for longer than $1 (= $2) µs, at most $3
	cleanupHoldersSQL string // the same in the holders table
	holdersSQL        string // name, owner, fence, µs left, meta, shared, lim, delay of every holder

	multi multiSQL // shared holds, permits and writer intents
}

// outcome is an exclusive acquire's result, and when it was refused
// because shared holders or permits hold the name, their limit.
type outcome struct {
	driver.Result
	multi bool // the name is held by shared holders or permits
	lim   int  // their semaphore's limit, 0 for shared holders
}

// column is a column that tables made by an earlier release lack.
type column struct{ name, ddl string }

// addColumns adds to table the columns of cols it lacks, as listed by
// columnsSQL (with the table's name as its parameter). A column that a
// concurrent migration added first is not an error.
func addColumns(ctx context.Context, db querier, columnsSQL, table string, cols []column) error {
	have := func() (map[string]bool, error) {
		rows, err := db.QueryContext(ctx, columnsSQL, table)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := make(map[string]bool)
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return nil, err
			}
			m[strings.ToLower(name)] = true
		}
		return m, rows.Err()
	}
	got, err := have()
	if err != nil {
		return fmt.Errorf("add columns to %s: %w", table, err)
	}
	for _, c := range cols {
		if got[c.name] {
			continue
		}
		if _, err := db.ExecContext(ctx, c.ddl); err != nil {
			if now, err2 := have(); err2 != nil || !now[c.name] {
				return fmt.Errorf("add column %s to %s: %w", c.name, table, err)
			}
		}
	}
	return nil
}

// cleanupHolders deletes up to limit holders expired for longer than
// retention.
func (q *queries) cleanupHolders(ctx context.Context, db querier, retention time.Duration, limit int) (int64, error) {
	res, err := db.ExecContext(ctx, q.cleanupHoldersSQL, micros(retention), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// cleanup deletes up to limit rows idle for longer than retention.
func (q *queries) cleanup(ctx context.Context, db querier, retention time.Duration, limit int) (int64, error) {
	res, err := db.ExecContext(ctx, q.cleanupSQL, micros(retention), micros(retention), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// holders returns every held lock.
func (q *queries) holders(ctx context.Context, db querier) ([]driver.Holder, error) {
	rows, err := db.QueryContext(ctx, q.holdersSQL)
	if err != nil {
		return nil, err
	}
	return readHolders(rows)
}

// execReleases returns release and forceRelease steps that run the
// statements release (name, owner) and force (name) and report whether
// they changed a row.
func execReleases(release, force string) (func(context.Context, querier, string, string) (bool, error), func(context.Context, querier, string) (bool, error)) {
	return func(ctx context.Context, db querier, name, owner string) (bool, error) {
			return affected(db.ExecContext(ctx, release, name, owner))
		}, func(ctx context.Context, db querier, name string) (bool, error) {
			return affected(db.ExecContext(ctx, force, name))
		}
}

var builders = map[Dialect]func(table string, bound time.Duration) *queries{
	MySQL:      mysqlQueries,
	PostgreSQL: postgresQueries,
	SQLite:     sqliteQueries,
}

// retryable reports whether err is a rolled-back transaction, or a
// statement SQLite refused before writing anything, that can be run again
// as it was.
func retryable(err error) bool {
	return errorKinds{}.Classify(err) == driver.ErrorTransient
}

// missingTable reports whether err says that the table a statement names
// does not exist: PostgreSQL's undefined_table, MySQL's ER_NO_SUCH_TABLE
// (see their dialect packages), SQLite's "no such table" (SQLite gives it
// no code of its own).
func missingTable(err error) bool {
	if dialects.Classify(err) == dialects.NoTable {
		return true
	}
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 1 && strings.Contains(err.Error(), "no such table")
}

// oldSchema reports whether err says that a table or a column of the
// schema is missing while the lease table exists: the holders table, or
// the lease table's columns for shared holds and semaphores, of a table
// created by an older dlock and opened without migrating.
func oldSchema(err error, table string) bool {
	if missingTable(err) {
		return strings.Contains(err.Error(), holdersTable(table))
	}
	if dialects.Classify(err) == dialects.NoColumn {
		return true
	}
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 1 &&
		(strings.Contains(err.Error(), "no such column") || strings.Contains(err.Error(), "has no column named"))
}

// errorKinds is the databases' driver.Classifier, embedded in sqlDriver;
// the paths that return errors outside driver steps (Open, Migrate) use
// it through storeError.
type errorKinds struct{}

// Classify implements driver.Classifier. The dialect packages say which
// of PostgreSQL's SQLSTATEs and MySQL's error numbers refuse the
// credentials or a step they are not granted (ErrorDenied) or a write for
// lack of space (ErrorNoSpace); of SQLite's errors, SQLITE_FULL (13, any
// extended code: the disk is full or the database reached its
// max_page_count) is a lack of space. ErrorTransient is a transaction
// rolled back by a deadlock or a serialization failure, or a statement
// SQLite refused before writing anything (see sqliteBusy): it is the one
// definition of "transient" for this driver, whose steps run such
// statements again themselves (see retryable).
func (errorKinds) Classify(err error) driver.ErrorKind {
	switch dialects.Classify(err) {
	case dialects.Denied:
		return driver.ErrorDenied
	case dialects.NoSpace:
		return driver.ErrorNoSpace
	case dialects.Retryable:
		return driver.ErrorTransient
	}
	var ce interface{ Code() int }
	switch {
	case errors.As(err, &ce) && ce.Code()&0xff == 13:
		return driver.ErrorNoSpace
	case sqliteBusy(err):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// storeError returns err as a Locker returns a step's: wrapping
// dlock.ErrDenied or dlock.ErrNoSpace by its kind (see errorKinds), for
// the errors of Open and Migrate.
func storeError(err error) error { return driver.StoreError(errorKinds{}, err) }

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED
// (any extended code). SQLite returns them without waiting out the busy
// timeout in a few cases, such as two connections switching a new file to
// WAL mode at once; the statement wrote nothing. The driver's error type
// is matched by its Code method, so sqllock does not import it.
func sqliteBusy(err error) bool {
	var ce interface{ Code() int }
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// micros converts d to whole microseconds, the unit of every duration
// passed to the database.
func micros(d time.Duration) int64 { return d.Microseconds() }

// fromMicros converts microseconds from the database to a Duration,
// clamping negative values to 0.
func fromMicros(us int64) time.Duration {
	return time.Duration(max(us, 0)) * time.Microsecond
}

// heldSet reads (name, owner, fence) rows into a map.
func heldSet(rows *sql.Rows) (map[leaseKey]uint64, error) {
	defer rows.Close()
	held := make(map[leaseKey]uint64)
	for rows.Next() {
		var (
			name, owner []byte
			fence       int64
		)
		if err := rows.Scan(&name, &owner, &fence); err != nil {
			return nil, err
		}
		held[leaseKey{string(name), string(owner)}] = uint64(fence)
	}
	return held, rows.Err()
}

// notTaken is the Result of an exclusive acquire that found name's row
// held by another owner: leftUs is the row's lease left by the database's
// clock (negative once it ended), stamp and ttlUs the row's stamp and its
// holder's TTL, stamp "" for shared holders and permits, and ignored
// unless the holder's TTL is known (see Options.ClockBound). A lease in
// doubt,
// and one of shared holders or permits (multi), keeps the name until it
// ended bound ago.
func notTaken(leftUs int64, multi bool, stamp string, ttlUs int64, bound time.Duration) driver.Result {
	res := driver.Result{Remaining: fromMicros(leftUs)}
	if leftUs <= 0 || multi {
		res.Remaining = fromMicros(leftUs + micros(bound))
	}
	if stamp != "" && ttlUs > 0 {
		res.Stamp, res.StampTTL = stamp, fromMicros(ttlUs)
	}
	return res
}

// readHolders reads (name, owner, fence, remaining µs, metadata, shared,
// limit, lock-delay µs) rows. A holder is Delayed once the µs left are
// no more than its delay (see resume.go).
func readHolders(rows *sql.Rows) ([]driver.Holder, error) {
	defer rows.Close()
	var hs []driver.Holder
	for rows.Next() {
		var (
			name, owner, meta []byte
			fence, us, delay  int64
			shared            bool
			lim               int
		)
		if err := rows.Scan(&name, &owner, &fence, &us, &meta, &shared, &lim, &delay); err != nil {
			return nil, err
		}
		hs = append(hs, driver.Holder{Name: string(name), Owner: string(owner), Fence: uint64(fence), Remaining: fromMicros(us),
			Metadata: string(meta), Shared: shared, Limit: lim, Delayed: delay > 0 && us <= delay})
	}
	return hs, rows.Err()
}

// affected returns whether res changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
