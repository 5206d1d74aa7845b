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
)

func init() {
	backend.Register("mysql", open)
	backend.Register("postgres", open)
	backend.Register("postgresql", open)
	backend.Register("sqlite", open)
}

// sqlDrivers names the database/sql driver each scheme needs and the
// package that registers it. sqllock itself imports the MySQL and pgx
// drivers (see the package documentation), so only SQLite's must be
// imported by the program (the dlock command does).
var sqlDrivers = map[string]struct{ name, pkg string }{
	"mysql":      {"mysql", "github.com/go-sql-driver/mysql"},
	"postgres":   {"pgx", "github.com/jackc/pgx/v5/stdlib"},
	"postgresql": {"pgx", "github.com/jackc/pgx/v5/stdlib"},
	"sqlite":     {"sqlite", "modernc.org/sqlite"},
}

// postgresParams are the libpq parameters a postgres:// URL may carry
// besides table and migrate. host may name a Unix socket directory.
var postgresParams = []string{"host", "port", "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

// open serves store URLs:
//
//	mysql://user[:pass]@host[:port]/dbname[?tls=true&tls_ca=/ca.pem&...]
//	postgres://[user[:pass]@][host][:port][/dbname][?host=/socket/dir&sslmode=...]
//	sqlite:///absolute/path.db
//
// with the query parameters table (Options.Table), clock_bound
// (Options.ClockBound, a Go duration such as 10s) and migrate (true by
// default; false sets Options.NoMigrate, and for SQLite also creates no
// file: a missing one is an error wrapping fs.ErrNotExist). A postgres://
// URL follows libpq: the host may instead be given by the host parameter,
// which may be a Unix socket directory, and a missing database name means
// the user's name. max_conns (Options.MaxConns) bounds the pool, which
// keeps its connections for reuse (see DefaultMaxConns); after a failed
// dial to a PostgreSQL or MySQL server the pool dials again one
// connection at a time, with a pause growing from 50 ms to 2 s, with
// jitter. A mysql:// URL speaks TLS when it carries tls=true or
// any of backend.TLSParams (see mysqlConnector). SQLite files are opened in WAL mode with a busy timeout, as the package
// documentation recommends. Opening connects once, within ctx. The Locker
// closes the *sql.DB it opens.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	known := []string{"table", "migrate", "clock_bound", "max_conns"}
	if u.Scheme == "postgres" || u.Scheme == "postgresql" {
		known = append(append(known, postgresParams...), backend.TLSParams...)
	}
	if u.Scheme == "mysql" {
		known = append(known, mysqlParams...)
	}
	q, err := backend.URLParams(u, known...)
	if err != nil {
		return nil, err
	}
	opts, err := urlOptions(q)
	if err != nil {
		return nil, err
	}
	conns, err := maxConns(opts.MaxConns)
	if err != nil {
		return nil, err
	}
	drv := sqlDrivers[u.Scheme]
	if !slices.Contains(sql.Drivers(), drv.name) {
		return nil, fmt.Errorf("sqllock: %s:// needs the database/sql driver %q: import %s", u.Scheme, drv.name, drv.pkg)
	}
	var (
		dsn     string
		dialect Dialect
		db      *sql.DB // opened by the scheme's case, or else from dsn below
	)
	switch u.Scheme {
	case "mysql":
		connector, err := mysqlConnector(u, q)
		if err != nil {
			return nil, err
		}
		db, dialect = sql.OpenDB(newBackoffConnector(connector)), MySQL
	case "postgres", "postgresql":
		if db, err = openPostgres(u, q); err != nil {
			return nil, err
		}
		dialect = PostgreSQL
	case "sqlite":
		if dsn, err = sqliteDSN(u, opts.NoMigrate); err != nil {
			return nil, err
		}
		dialect = SQLite
		if opts.MaxConns == 0 {
			conns = DefaultSQLiteConns
		}
	}
	if db == nil {
		if db, err = sql.Open(drv.name, dsn); err != nil {
			return nil, fmt.Errorf("sqllock: open: %w", err)
		}
	}
	sizePool(db, conns)
	// A new SQLite file switching to WAL mode can refuse a second process
	// that opens it at the same moment, without waiting; try again.
	if err := retryErr(ctx, func() error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("sqllock: connect: %w: %w", ctx.Err(), classify(err))
		}
		return nil, fmt.Errorf("sqllock: connect: %w", classify(err))
	}
	l, err := newLocker(db, dialect, opts, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// sqliteDSN returns the modernc.org/sqlite data source name for a
// sqlite:// store URL: the file, with a busy timeout, and WAL mode unless
// noMigrate (then the file must exist already).
func sqliteDSN(u *url.URL, noMigrate bool) (string, error) {
	if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf("%w: sqlite:// takes an absolute path, as in sqlite:///var/lib/app/locks.db", dlock.ErrBadURL)
	}
	dsn := "file:" + u.Path + "?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
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

// postgresDSN returns the pgx data source name (a URL) for a postgres://
// store URL with query parameters q. As with libpq, the host parameter
// overrides the URL's host and may be a Unix socket directory, and the
// database name may be left out (the server then takes the user's name).
func postgresDSN(u *url.URL, q url.Values) (string, error) {
	pg := url.URL{Scheme: "postgres"}
	if q.Get("host") != "" {
		// The URL may still carry a port, which applies to the socket.
		if port := u.Port(); port != "" {
			pg.Host = ":" + port
		}
	} else {
		addr, err := oneHost(u, 5432)
		if err != nil {
			return "", err
		}
		pg.Host = addr
	}
	name := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: postgres:// takes the database name as its path, as in postgres://user@host/dbname", dlock.ErrBadURL)
	}
	if name != "" {
		pg.Path = "/" + name
	}
	user := u.User.Username()
	switch pass := backend.URLPassword(u); {
	case pass != "":
		pg.User = url.UserPassword(user, pass)
	case user != "":
		pg.User = url.User(user)
	}
	params := url.Values{}
	for _, k := range postgresParams {
		if v := q.Get(k); v != "" {
			params.Set(k, v)
		}
	}
	pg.RawQuery = params.Encode()
	return pg.String(), nil
}

// oneHost returns u's single host:port.
func oneHost(u *url.URL, defaultPort int) (string, error) {
	hosts, err := backend.URLHosts(u, defaultPort)
	if err != nil {
		return "", err
	}
	if len(hosts) > 1 {
		return "", fmt.Errorf("%w: %s:// takes one host", dlock.ErrBadURL, u.Scheme)
	}
	return hosts[0], nil
}

// dbName returns the database named by u's path.
func dbName(u *url.URL) (string, error) {
	name := strings.Trim(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: %s:// needs the database name as its path, as in %s://user@host/dbname", dlock.ErrBadURL, u.Scheme, u.Scheme)
	}
	return name, nil
}
