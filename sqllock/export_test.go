package sqllock

import (
	sqldriver "database/sql/driver"
	"net/url"
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
