package sqllock

import (
	sqldriver "database/sql/driver"
	"net/url"

	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.Classify = classify
	testhook.MySQLConnector = func(store string) (sqldriver.Connector, error) {
		u, err := url.Parse(store)
		if err != nil {
			return nil, err
		}
		return mysqlConnector(u, u.Query())
	}
}
