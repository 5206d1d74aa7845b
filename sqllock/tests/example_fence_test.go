package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/sqllock"
)

// openExampleDB opens a SQLite database in a new directory; done closes it
// and removes the directory.
func openExampleDB() (db *sql.DB, done func()) {
	dir, _ := os.MkdirTemp("", "fence-example-")
	db, _ = sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	return db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

// A table of fenced values in SQLite; PostgreSQL and MySQL are the same
// with their dialect. The tokens are the holders' lock.Fence().
func Example_fenceTable() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()

	table, err := sqllock.NewFenceTable(db, sqllock.SQLite, "") // sqllock.DefaultFenceTable
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := table.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(table.Write(ctx, "report/2024", 42, []byte("written by 42")))
	fmt.Println(table.Write(ctx, "report/2024", 42, []byte("42 again"))) // the same holder
	err = table.Write(ctx, "report/2024", 41, []byte("stale"))
	fmt.Println(errors.Is(err, fence.ErrStale))
	value, token, _ := table.Read(ctx, "report/2024")
	fmt.Printf("%s %d\n", value, token)
	// Output:
	// <nil>
	// <nil>
	// true
	// 42 again 42
}

// Fence an UPDATE of the application's own table, which keeps each row's
// token in a column of its own.
func Example_fenceUpdate() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	db.ExecContext(ctx, `CREATE TABLE stock (sku TEXT PRIMARY KEY, count INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`)
	db.ExecContext(ctx, `INSERT INTO stock (sku, count) VALUES ('sku-42', 10)`)

	setCount := func(token uint64, count int) error {
		u := fence.Update{
			Placeholder: fence.Question,
			Table:       "stock",
			Set:         []fence.Column{{Name: "count", Value: count}},
			Where:       []fence.Column{{Name: "sku", Value: "sku-42"}},
		}
		return u.Exec(ctx, db, token) // UPDATE stock SET count = ?, fence = ? WHERE sku = ? AND COALESCE(fence, 0) <= ?
	}
	fmt.Println(setCount(42, 9))
	fmt.Println(errors.Is(setCount(41, 9), fence.ErrStale))
	var count, token int
	db.QueryRowContext(ctx, `SELECT count, fence FROM stock WHERE sku = 'sku-42'`).Scan(&count, &token)
	fmt.Println(count, token)
	// Output:
	// <nil>
	// true
	// 9 42
}
