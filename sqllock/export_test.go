package sqllock

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"net/url"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
)

// MySQLConnector returns the connector dlock.Open makes for the mysql://
// URL store (credentials, TLS), so that a test can give Lockers of one
// URL one shared pool.
func MySQLConnector(store string) (sqldriver.Connector, error) {
	u, err := url.Parse(store)
	if err != nil {
		return nil, err
	}
	return mysqlConnector(u, u.Query())
}

// NewDriver returns the driver a Locker of New would use, for tests of
// the driver's steps (a Result's Stamp, a Lease's Takeover) that the core
// does not show.
func NewDriver(db *sql.DB, dialect Dialect, opts *Options) (driver.Driver, error) {
	d, _, err := newDriver(db, dialect, opts, false)
	return d, err
}

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }

// Classify is the classifier of the store's errors (ErrDenied,
// ErrNoSpace), for tests of errors a real server seldom gives.
func Classify(err error) error { return classify(err) }
