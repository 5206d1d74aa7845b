package mysql

import (
	sqldriver "database/sql/driver"
	"fmt"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// quiet is a go-sql-driver logger that writes nothing: the driver logs a
// broken connection ("unexpected EOF") to the process's standard error
// before it returns the error, which sqllock returns anyway.
type quiet struct{}

func (quiet) Print(...any) {}

// params are the query parameters a mysql:// URL may carry besides
// table and migrate: the TLS parameters every backend shares.
var params = backend.TLSParams

// connector returns the connector for a mysql:// store URL with
// query parameters q. The connection speaks TLS, verifying the server's
// certificate, when q has tls=true (with the system's roots unless tls_ca
// names others) or any of backend.TLSParams; tls=false with any of them
// is an error, and so is any other value of tls: plaintext fallback
// (go-sql-driver's tls=preferred) is not offered, and skipping
// verification is asked for by name with tls_insecure_skip_verify=true.
// The TLS configuration goes to the connector itself, not to
// go-sql-driver's process-wide registry (RegisterTLSConfig), which
// would keep every Open's configuration for the life of the process.
func connector(u *url.URL, q url.Values) (sqldriver.Connector, error) {
	addr, err := dialects.OneHost(u, 3306)
	if err != nil {
		return nil, err
	}
	c := gomysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = u.User.Username(), backend.URLPassword(u), "tcp", addr
	c.Logger = quiet{} // library code never logs: errors are returned
	if c.DBName, err = dbName(u); err != nil {
		return nil, err
	}
	if c.TLS, err = backend.TLSConfig(q, u.Hostname(), false); err != nil {
		return nil, err
	}
	return gomysql.NewConnector(c)
}

// dbName returns the database named by u's path.
func dbName(u *url.URL) (string, error) {
	name := strings.Trim(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: %s:// needs the database name as its path, as in %s://user@host/dbname", dlock.ErrBadURL, u.Scheme, u.Scheme)
	}
	return name, nil
}
