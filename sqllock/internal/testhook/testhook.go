// Package testhook gives sqllock's test module (sqllock/tests) what it
// checks of sqllock's internals. sqllock sets the variables in its init;
// no program outside sqllock's directory can import this package.
package testhook

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var (
	// MySQLConnector returns the connector dlock.Open makes for the
	// mysql:// URL store (credentials, TLS), so that a test can give
	// Lockers of one URL one shared pool.
	MySQLConnector func(store string) (sqldriver.Connector, error)

	// Classify returns a store's error as a Locker does (wrapping
	// ErrDenied or ErrNoSpace by the driver's Classify), for tests of
	// errors a real server seldom gives.
	Classify func(err error) error
)

// New and Open return a Locker and the driver under it, for dlocktest's
// Harness.LockerAndDriver and for tests of the driver's steps (a Result's
// Stamp, a Lease's Takeover) that the core does not show. They cannot
// take sqllock's types (sqllock imports this package), so they take what
// the tests need of them.
var (
	// New is sqllock.New(db, dialect, &sqllock.Options{NoMigrate:
	// noMigrate}) for the dialect whose String is dialect.
	New func(db *sql.DB, dialect string, noMigrate bool) (*dlock.Locker, driver.Driver, error)

	// Open is what dlock.Open does with the store URL store, without
	// dlock.Open's wrapping and redaction of errors.
	Open func(ctx context.Context, store string) (*dlock.Locker, driver.Driver, error)
)
