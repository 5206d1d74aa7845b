// Package mysql gives package sqllock MySQL and MariaDB through
// github.com/go-sql-driver/mysql: a program imports it for its side
// effects, as it imports a database/sql driver,
//
//	import _ "github.com/dlock-go/dlock/sqllock/mysql"
//
// and then dlock.Open serves mysql:// URLs, and sqllock.New and
// sqllock.Migrate take sqllock.MySQL with a *sql.DB opened with
// go-sql-driver's database/sql driver ("mysql", which this import
// registers too). It also gives sqllock the meaning of MySQL's errors.
// Package sqllock itself links no database driver: a program that
// imports only this dialect package does not link PostgreSQL's.
package mysql

import (
	"errors"
	"slices"

	gomysql "github.com/go-sql-driver/mysql"

	_ "github.com/dlock-go/dlock/sqllock" // the core, whose Open serves the scheme
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

func init() {
	dialects.Register(dialects.Dialect{
		Name:      "mysql",
		Schemes:   []string{"mysql"},
		Params:    params,
		Connector: connector,
		Classify:  classify,
	})
}

// classify says what a MySQL or MariaDB error means to sqllock, by its
// number:
//   - dialects.Denied: ER_DBACCESS_DENIED_ERROR (1044),
//     ER_ACCESS_DENIED_ERROR (1045, also a user that must connect with
//     TLS or a client certificate and did not),
//     ER_TABLEACCESS_DENIED_ERROR (1142), ER_COLUMNACCESS_DENIED_ERROR
//     (1143), ER_SPECIFIC_ACCESS_DENIED_ERROR (1227),
//     ER_PROCACCESS_DENIED_ERROR (1370),
//     ER_ACCESS_DENIED_NO_PASSWORD_ERROR (1698) and MySQL's
//     ER_SECURE_TRANSPORT_REQUIRED (3159);
//   - dialects.NoSpace: ER_DISK_FULL (1021) and ER_RECORD_FILE_FULL
//     (1114, "the table is full", as when a tablespace reaches its
//     maximum size);
//   - dialects.Retryable: ER_LOCK_DEADLOCK (1213);
//   - dialects.NoTable: ER_NO_SUCH_TABLE (1146);
//   - dialects.NoColumn: ER_BAD_FIELD_ERROR (1054).
func classify(err error) dialects.Kind {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return dialects.Other
	}
	switch n := me.Number; {
	case slices.Contains([]uint16{1044, 1045, 1142, 1143, 1227, 1370, 1698, 3159}, n):
		return dialects.Denied
	case n == 1021 || n == 1114:
		return dialects.NoSpace
	case n == 1213:
		return dialects.Retryable
	case n == 1146:
		return dialects.NoTable
	case n == 1054:
		return dialects.NoColumn
	}
	return dialects.Other
}
