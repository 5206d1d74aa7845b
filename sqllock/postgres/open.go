package postgres

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// params are the libpq parameters a postgres:// URL may carry besides
// the core's (table, migrate, clock_bound, max_conns) and the TLS
// parameters every backend shares. host may name a Unix socket
// directory.
var params = []string{"host", "port", "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

// libpqTLSParams are libpq's TLS parameters, which a postgres:// URL
// passes on to pgx as libpq reads them.
var libpqTLSParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey"}

// connector returns the pgx connector for a postgres:// store URL with
// query parameters q. TLS is asked for in one of two ways, not both:
// libpq's parameters (sslmode, sslrootcert, sslcert, sslkey), passed on
// to pgx as they are; or the tls_* parameters every dlock backend takes
// (backend.TLSParams), which make TLS mandatory and verified as
// sslmode=verify-full does (the certificate's chain against tls_ca or
// the system's authorities, and its name against tls_server_name or the
// host), with a client certificate from tls_cert and tls_key, and no
// fallback to a connection without TLS.
func connector(u *url.URL, q url.Values) (sqldriver.Connector, error) {
	dsn, err := pgxDSN(u, q)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := backend.TLSConfig(q, u.Hostname(), false)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
		}
		return answerFirst{stdlib.GetConnector(*cfg)}, nil
	}
	for _, k := range libpqTLSParams {
		if q.Has(k) {
			return nil, fmt.Errorf("%w: postgres:// takes either the tls_* parameters or libpq's %s, not both", dlock.ErrBadURL, k)
		}
	}
	if q.Get("host") != "" {
		return nil, fmt.Errorf("%w: the tls_* parameters need a TCP host, not the host parameter (PostgreSQL speaks no TLS on Unix sockets)", dlock.ErrBadURL)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	// ParseConfig's default sslmode (prefer) falls back to a connection
	// without TLS; the tls_* parameters allow none.
	cfg.TLSConfig, cfg.Fallbacks = tlsConfig, nil
	return answerFirst{stdlib.GetConnector(*cfg)}, nil
}

// answerFirst is a connector whose failed connections report the
// server's own answer alone when one attempt got one. With libpq's
// default sslmode (prefer) pgx tries TLS and then a plain connection and
// joins both errors: a wrong password on a server without TLS read
// "tls error: server refused TLS connection" before the refusal of the
// password that was the cause.
type answerFirst struct{ sqldriver.Connector }

func (c answerFirst) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, serverAnswer(err)
	}
	return conn, nil
}

// serverAnswer returns, for a pgx connect error of several attempts one
// of which the server answered with an error of its own (a
// *pgconn.PgError, such as a refused password), that attempt's error
// alone, with pgx's prefix naming the user and database; any other error
// as it is.
func serverAnswer(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	joined, ok := ce.Unwrap().(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	for _, attempt := range joined.Unwrap() {
		var pe *pgconn.PgError
		if errors.As(attempt, &pe) {
			return fmt.Errorf("failed to connect to `user=%s database=%s`: %w", ce.Config.User, ce.Config.Database, attempt)
		}
	}
	return err
}

// pgxDSN returns the pgx data source name (a URL) for a postgres:// store
// URL with query parameters q. As with libpq, the host parameter
// overrides the URL's host and may be a Unix socket directory, and the
// database name may be left out (the server then takes the user's name).
func pgxDSN(u *url.URL, q url.Values) (string, error) {
	pg := url.URL{Scheme: "postgres"}
	if q.Get("host") != "" {
		// The URL may still carry a port, which applies to the socket.
		if port := u.Port(); port != "" {
			pg.Host = ":" + port
		}
	} else {
		addr, err := dialects.OneHost(u, 5432)
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
	values := url.Values{}
	for _, k := range params {
		if v := q.Get(k); v != "" {
			values.Set(k, v)
		}
	}
	pg.RawQuery = values.Encode()
	return pg.String(), nil
}
