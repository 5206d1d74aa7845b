package sqllock

import (
	"database/sql"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// libpqTLSParams are libpq's TLS parameters, which a postgres:// URL
// passes on to pgx as libpq reads them.
var libpqTLSParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey"}

// openPostgres returns a *sql.DB (driver pgx) for a postgres:// store URL
// with query parameters q. TLS is asked for in one of two ways, not both:
// libpq's parameters (sslmode, sslrootcert, sslcert, sslkey), passed on
// to pgx as they are; or the tls_* parameters every dlock backend takes
// (backend.TLSParams), which make TLS mandatory and verified as
// sslmode=verify-full does (the certificate's chain against tls_ca or
// the system's authorities, and its name against tls_server_name or the
// host), with a client certificate from tls_cert and tls_key, and no
// fallback to a connection without TLS.
func openPostgres(u *url.URL, q url.Values) (*sql.DB, error) {
	dsn, err := postgresDSN(u, q)
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
		return sql.OpenDB(newBackoffConnector(stdlib.GetConnector(*cfg))), nil
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
	return sql.OpenDB(newBackoffConnector(stdlib.GetConnector(*cfg))), nil
}
