// Command unlinked uses sqllock without its dialect packages, as a
// program that forgot their import does, and prints what each call
// returns, one line each: "name ok" or "name err <ErrInvalid> <ErrBadURL>
// <message>". TestUnlinkedDialect runs it.
package main

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// connector dials nothing: no call here may contact a database.
type connector struct{}

func (connector) Connect(context.Context) (sqldriver.Conn, error) {
	return nil, errors.New("unlinked: no database")
}

func (connector) Driver() sqldriver.Driver { return nil }

func main() {
	ctx := context.Background()
	db := sql.OpenDB(connector{})
	defer db.Close()
	report := func(name string, err error) {
		if err == nil {
			fmt.Printf("%s ok\n", name)
			return
		}
		fmt.Printf("%s err %t %t %v\n", name, errors.Is(err, dlock.ErrInvalid), errors.Is(err, dlock.ErrBadURL), err)
	}
	for _, d := range []sqllock.Dialect{sqllock.PostgreSQL, sqllock.MySQL, sqllock.SQLite} {
		l, err := sqllock.New(db, d, nil)
		if err == nil {
			l.Close()
		}
		report("new-"+d.String(), err)
		if d != sqllock.SQLite { // Migrate on SQLite would dial
			report("migrate-"+d.String(), sqllock.Migrate(ctx, db, d, ""))
		}
	}
	for _, u := range []string{"postgres://u@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db", "mysql://u@127.0.0.1:1/db"} {
		l, err := dlock.Open(ctx, u)
		if err == nil {
			l.Close()
		}
		report("open-"+u[:len(u)-len("://u@127.0.0.1:1/db")], err)
	}
}
