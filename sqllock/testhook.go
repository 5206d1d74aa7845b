package sqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"net/url"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.Classify = storeError
	testhook.New = func(db *sql.DB, dialect string, noMigrate bool) (*dlock.Locker, driver.Driver, error) {
		var d Dialect
		for _, c := range []Dialect{MySQL, PostgreSQL, SQLite} {
			if c.String() == dialect {
				d = c
			}
		}
		return newLocker(db, d, &Options{NoMigrate: noMigrate}, false)
	}
	testhook.Open = func(ctx context.Context, store string) (*dlock.Locker, driver.Driver, error) {
		u, err := url.Parse(store)
		if err != nil {
			return nil, nil, err
		}
		return openLocker(ctx, u)
	}
	testhook.MySQLConnector = func(store string) (sqldriver.Connector, error) {
		u, err := url.Parse(store)
		if err != nil {
			return nil, err
		}
		d, ok := dialects.ForScheme(u.Scheme)
		if !ok || d.Name != MySQL.String() {
			return nil, fmt.Errorf("%s is not a mysql:// URL, or sqllock/mysql is not imported", u.Redacted())
		}
		return d.Connector(u, u.Query())
	}
}
