package sqllock

import (
	sqldriver "database/sql/driver"
	"fmt"
	"net/url"

	"github.com/dlock-go/dlock/sqllock/internal/dialects"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.Classify = storeError
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
