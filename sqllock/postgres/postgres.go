// Package postgres gives package sqllock PostgreSQL through pgx
// (github.com/jackc/pgx/v5): a program imports it for its side effects,
// as it imports a database/sql driver,
//
//	import _ "github.com/dlock-go/dlock/sqllock/postgres"
//
// and then dlock.Open serves postgres:// and postgresql:// URLs, and
// sqllock.New and sqllock.Migrate take sqllock.PostgreSQL with a *sql.DB
// opened with pgx's database/sql driver ("pgx", which this import
// registers too). It also gives sqllock the meaning of PostgreSQL's
// errors and the LISTEN/NOTIFY wake-ups of waiters. Package sqllock
// itself links no database driver: a program that imports only this
// dialect package does not link MySQL's.
package postgres

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock/backend"
	_ "github.com/dlock-go/dlock/sqllock" // the core, whose Open serves the schemes
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

func init() {
	dialects.Register(dialects.Dialect{
		Name:      "postgresql",
		Schemes:   []string{"postgres", "postgresql"},
		Params:    append(slices.Clone(params), backend.TLSParams...),
		Connector: connector,
		Classify:  classify,
		Listen:    newListener,
		Cancel:    canceller,
	})
}

// canceller returns the cancel request of a pgx connection, which asks
// the server, on a connection of its own, to cancel the statement that
// driverConn runs (PostgreSQL needs no privilege for it: the request
// carries the session's secret key); nil if driverConn is not pgx's.
func canceller(driverConn any) func(context.Context) error {
	c, ok := driverConn.(*stdlib.Conn)
	if !ok {
		return nil
	}
	return c.Conn().PgConn().CancelRequest
}

// classify says what a PostgreSQL error means to sqllock, by its
// SQLSTATE:
//   - dialects.Denied: invalid_password (28P01),
//     invalid_authorization_specification (28000, as when pg_hba.conf
//     rejects a connection or a client certificate) and
//     insufficient_privilege (42501, a missing GRANT);
//   - dialects.NoSpace: disk_full (53100); not out_of_memory (53200),
//     which is not a lack of space;
//   - dialects.Retryable: serialization_failure (40001) and
//     deadlock_detected (40P01);
//   - dialects.NoTable: undefined_table (42P01);
//   - dialects.NoColumn: undefined_column (42703).
func classify(err error) dialects.Kind {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return dialects.Other
	}
	switch pe.Code {
	case "28P01", "28000", "42501":
		return dialects.Denied
	case "53100":
		return dialects.NoSpace
	case "40001", "40P01":
		return dialects.Retryable
	case "42P01":
		return dialects.NoTable
	case "42703":
		return dialects.NoColumn
	}
	return dialects.Other
}
