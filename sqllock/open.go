package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

func init() {
	dialects.Open = open
	backend.Register("sqlite", open)
}

// sqliteDriverName is the database/sql driver sqlite:// needs, and
// sqlitePackage the package whose import registers it: sqllock imports
// no SQLite driver (the dlock command imports this one).
const sqliteDriverName, sqlitePackage = "sqlite", "modernc.org/sqlite"

// open serves store URLs:
//
//	mysql://user[:pass]@host[:port]/dbname[?tls=true&tls_ca=/ca.pem&...]
//	postgres://[user[:pass]@][host][:port][/dbname][?host=/socket/dir&sslmode=...]
//	sqlite:///absolute/path.db
//
// with the query parameters table (Options.Table), clock_bound
// (Options.ClockBound, a Go duration such as 10s) and migrate (true by
// default; false sets Options.NoMigrate, and for SQLite also creates no
// file: a missing one is an error wrapping fs.ErrNotExist). The mysql://
// and postgres:// (or postgresql://) schemes are registered by the
// dialect packages sqllock/mysql and sqllock/postgres, which make their
// connectors; sqlite:// by sqllock itself. A postgres://
// URL follows libpq: the host may instead be given by the host parameter,
// which may be a Unix socket directory, and a missing database name means
// the user's name. max_conns (Options.MaxConns) bounds the pool, which
// keeps its connections for reuse (see DefaultMaxConns); after a failed
// dial to a PostgreSQL or MySQL server the pool dials again one
// connection at a time, with a pause growing from 50 ms to 2 s, with
// jitter. A mysql:// URL speaks TLS when it carries tls=true or
// any of backend.TLSParams. SQLite files are opened in WAL mode with a busy timeout, as the package
// documentation recommends. Opening connects once, within ctx. The Locker
// closes the *sql.DB it opens.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	l, _, err := openLocker(ctx, u)
	return l, err
}

// openLocker is open, also returning the driver under the Locker (for
// the test hook).
func openLocker(ctx context.Context, u *url.URL) (*dlock.Locker, driver.Driver, error) {
	known := []string{"table", "migrate", "clock_bound", "max_conns"}
	if d, ok := dialects.ForScheme(u.Scheme); ok {
		known = append(known, d.Params...)
	}
	q, err := backend.URLParams(u, known...)
	if err != nil {
		return nil, nil, err
	}
	opts, err := urlOptions(q)
	if err != nil {
		return nil, nil, err
	}
	conns, err := maxConns(opts.MaxConns)
	if err != nil {
		return nil, nil, err
	}
	db, dialect, err := openDB(u, q, opts.NoMigrate)
	if err != nil {
		return nil, nil, err
	}
	if dialect == SQLite && opts.MaxConns == 0 {
		conns = DefaultSQLiteConns
	}
	sizePool(db, conns)
	// A new SQLite file switching to WAL mode can refuse a second process
	// that opens it at the same moment, without waiting; try again.
	if err := retryErr(ctx, func() error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			return nil, nil, fmt.Errorf("sqllock: connect: %w: %w", ctx.Err(), storeError(err))
		}
		return nil, nil, fmt.Errorf("sqllock: connect: %w", storeError(err))
	}
	l, d, err := newLocker(db, dialect, opts, true)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, d, nil
}

// openDB returns the pool for the store URL u with query parameters q,
// not yet connected, and its dialect: through the connector of the
// dialect package that registered u's scheme, which dials with backoff
// (see backoffConnector), or else SQLite's database/sql driver.
func openDB(u *url.URL, q url.Values, noMigrate bool) (*sql.DB, Dialect, error) {
	if d, ok := dialects.ForScheme(u.Scheme); ok {
		c, err := d.Connector(u, q)
		if err != nil {
			return nil, 0, err
		}
		return sql.OpenDB(newBackoffConnector(c)), dialectNamed(d.Name), nil
	}
	if !slices.Contains(sql.Drivers(), sqliteDriverName) {
		return nil, 0, fmt.Errorf("sqllock: %s:// needs the database/sql driver %q: import %s", u.Scheme, sqliteDriverName, sqlitePackage)
	}
	dsn, err := sqliteDSN(u, noMigrate)
	if err != nil {
		return nil, 0, err
	}
	db, err := sql.Open(sqliteDriverName, dsn)
	if err != nil {
		return nil, 0, fmt.Errorf("sqllock: open: %w", err)
	}
	return db, SQLite, nil
}

// sqliteDSN returns the modernc.org/sqlite data source name for a
// sqlite:// store URL: the file, with a busy timeout, a journal size
// limit (walSizeLimit), and WAL mode unless noMigrate (then the file must
// exist already).
func sqliteDSN(u *url.URL, noMigrate bool) (string, error) {
	if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf("%w: sqlite:// takes an absolute path, as in sqlite:///var/lib/app/locks.db", dlock.ErrBadURL)
	}
	dsn := "file:" + u.Path + "?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")"
	if noMigrate {
		// Open read-write without create, and leave the journal mode as
		// it is (WAL if a Locker made the file). The Stat gives the
		// clearer error, mode=rw closes the race with a removal.
		if _, err := os.Stat(u.Path); err != nil {
			return "", fmt.Errorf("sqllock: %s is not created with migrate=false: %w", u.Path, err)
		}
		return dsn + "&mode=rw", nil
	}
	return dsn + "&_pragma=journal_mode(WAL)", nil
}

// urlOptions returns the Options a store URL's query parameters q ask
// for (table, migrate, clock_bound, max_conns), or an error wrapping
// dlock.ErrBadURL, before anything is contacted.
func urlOptions(q url.Values) (*Options, error) {
	opts := &Options{Table: q.Get("table")}
	if opts.Table != "" {
		// Bad input is reported before connecting.
		if err := validTable(opts.Table); err != nil {
			return nil, fmt.Errorf("sqllock: %w", err)
		}
	}
	if v := q.Get("migrate"); v != "" {
		migrate, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: migrate=%q: want true or false", dlock.ErrBadURL, v)
		}
		opts.NoMigrate = !migrate
	}
	if v := q.Get("clock_bound"); v != "" {
		bound, err := time.ParseDuration(v)
		if err != nil || bound < 0 {
			return nil, fmt.Errorf("%w: clock_bound=%q: want a duration such as 10s, not negative", dlock.ErrBadURL, v)
		}
		opts.ClockBound = bound
	}
	if v := q.Get("max_conns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: max_conns=%q: want a whole number of connections, 0 for the default (%d, %d on SQLite): %w", dlock.ErrBadURL, v, DefaultMaxConns, DefaultSQLiteConns, dlock.ErrInvalid)
		}
		opts.MaxConns = n
	}
	return opts, nil
}
