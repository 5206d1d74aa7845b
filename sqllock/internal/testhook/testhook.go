// Package testhook gives sqllock's test module (sqllock/tests) what it
// checks of sqllock's internals. sqllock sets the variables in its init;
// no program outside sqllock's directory can import this package.
package testhook

import (
	sqldriver "database/sql/driver"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
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

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver and for tests of the driver's steps (a
// Result's Stamp, a Lease's Takeover) that the core does not show.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }
