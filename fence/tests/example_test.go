package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/sqllock"
)

// Two holders of one lock in turn: the first was paused past its lease,
// the second took the lock over (a higher token) and wrote. When the first
// resumes, its write is refused. The tokens come from lock.Fence().
func ExampleGuard() {
	var (
		guard   fence.Guard
		balance = 100 // the state the lock protects
	)
	deduct := func(token uint64, amount int) error {
		return guard.Do(token, func() error {
			balance -= amount
			return nil
		})
	}

	const first, second = 41, 42 // lock.Fence() of each holder
	fmt.Println(deduct(second, 30), balance)
	err := deduct(first, 30) // the first holder resumes, still believing it holds the lock
	fmt.Println(errors.Is(err, fence.ErrStale), balance)
	fmt.Println(err)
	// Output:
	// <nil> 70
	// true 70
	// fence: guard: token 41 is below 42: fence: stale token
}

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
// with their dialect.
func ExampleTable() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()

	table, err := fence.NewTable(db, sqllock.SQLite, "") // fence.DefaultTable
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
func ExampleUpdate() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	db.ExecContext(ctx, `CREATE TABLE stock (sku TEXT PRIMARY KEY, count INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`)
	db.ExecContext(ctx, `INSERT INTO stock (sku, count) VALUES ('sku-42', 10)`)

	setCount := func(token uint64, count int) error {
		u := fence.Update{
			Dialect: sqllock.SQLite,
			Table:   "stock",
			Set:     []fence.Column{{Name: "count", Value: count}},
			Where:   []fence.Column{{Name: "sku", Value: "sku-42"}},
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

// A fenced value in Redis: one hash per key, written by one script. The
// token is the holder's lock.Fence().
func ExampleRedis() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	ctx := context.Background()

	store := fence.NewRedis(client)
	if err := store.Write(ctx, "report/2024", 42, []byte("written by 42")); errors.Is(err, fence.ErrStale) {
		fmt.Println("the lock was lost: a newer holder has written")
	}
}

// A fenced value in etcd: the token is stored in front of the value and
// compared in the write's transaction.
func ExampleEtcd() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	store := fence.NewEtcd(client)
	if err := store.Write(ctx, "/reports/2024", 42, []byte("written by 42")); errors.Is(err, fence.ErrStale) {
		fmt.Println("the lock was lost: a newer holder has written")
	}
	value, token, err := store.Read(ctx, "/reports/2024")
	fmt.Println(string(value), token, err)
}
