package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

func init() {
	backend.Register("mysql", open)
	backend.Register("postgres", open)
	backend.Register("postgresql", open)
	backend.Register("sqlite", open)
}

// sqlDrivers names the database/sql driver each scheme needs; like
// database/sql, sqllock does not import them: the program does
// (github.com/go-sql-driver/mysql, github.com/jackc/pgx/v5/stdlib,
// modernc.org/sqlite; the dlock command imports all three).
var sqlDrivers = map[string]struct{ name, pkg string }{
	"mysql":      {"mysql", "github.com/go-sql-driver/mysql"},
	"postgres":   {"pgx", "github.com/jackc/pgx/v5/stdlib"},
	"postgresql": {"pgx", "github.com/jackc/pgx/v5/stdlib"},
	"sqlite":     {"sqlite", "modernc.org/sqlite"},
}

// postgresParams are the libpq parameters a postgres:// URL may carry
// besides table.
var postgresParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

// open serves store URLs:
//
//	mysql://user[:pass]@host[:port]/dbname
//	postgres://user[:pass]@host[:port]/dbname[?sslmode=...]
//	sqlite:///absolute/path.db
//
// with the query parameter table (Options.Table). The password may also
// come from DLOCK_PASSWORD. SQLite files are opened in WAL mode with a busy
// timeout, as the package documentation recommends. The Locker closes the
// *sql.DB it opens.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	known := []string{"table"}
	if u.Scheme == "postgres" || u.Scheme == "postgresql" {
		known = append(known, postgresParams...)
	}
	q, err := backend.URLParams(u, known...)
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
	)
	switch u.Scheme {
	case "mysql":
		hosts, err := oneHost(u, 3306)
		if err != nil {
			return nil, err
		}
		c := mysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr = u.User.Username(), backend.URLPassword(u), "tcp", hosts
		if c.DBName, err = dbName(u); err != nil {
			return nil, err
		}
		dsn, dialect = c.FormatDSN(), MySQL
	case "postgres", "postgresql":
		addr, err := oneHost(u, 5432)
		if err != nil {
			return nil, err
		}
		name, err := dbName(u)
		if err != nil {
			return nil, err
		}
		pg := url.URL{Scheme: "postgres", Host: addr, Path: "/" + name}
		if pass := backend.URLPassword(u); pass != "" {
			pg.User = url.UserPassword(u.User.Username(), pass)
		} else {
			pg.User = url.User(u.User.Username())
		}
		params := url.Values{}
		for _, k := range postgresParams {
			if v := q.Get(k); v != "" {
				params.Set(k, v)
			}
		}
		pg.RawQuery = params.Encode()
		dsn, dialect = pg.String(), PostgreSQL
	case "sqlite":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("%w: sqlite:// takes an absolute path, as in sqlite:///var/lib/app/locks.db", dlock.ErrBadURL)
		}
		dsn = "file:" + u.Path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
		dialect = SQLite
	}
	db, err := sql.Open(drv.name, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqllock: open: %w", err)
	}
	// A new SQLite file switching to WAL mode can refuse a second process
	// that opens it at the same moment, without waiting; try again.
	if err := retryErr(ctx, func() error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqllock: connect: %w", err)
	}
	return newLocker(db, dialect, &Options{Table: q.Get("table")}, true), nil
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
