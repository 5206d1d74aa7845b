package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// A lock-guarded transaction: the business write commits only if the lock
// is still held, checked in the same transaction as the write (SQLite
// here; PostgreSQL and MySQL are the same with their dialect and
// placeholders). fence.Update also refuses a write older than the row's
// last one.
func ExampleCheckHeld() {
	db, done := openExampleDB()
	defer done()
	ctx := context.Background()
	db.ExecContext(ctx, `CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`)
	db.ExecContext(ctx, `INSERT INTO accounts (id, balance) VALUES (7, 100)`)
	locker, _ := sqllock.New(db, sqllock.SQLite, nil)
	defer locker.Close()
	lock, _ := locker.TryAcquire(ctx, "account/7")

	setBalance := func(balance int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := sqllock.CheckHeld(ctx, tx, sqllock.SQLite, "", lock); err != nil {
			return err
		}
		u := fence.Update{Placeholder: fence.Question, Table: "accounts",
			Set:   []fence.Column{{Name: "balance", Value: balance}},
			Where: []fence.Column{{Name: "id", Value: 7}}}
		if err := u.Exec(ctx, tx, lock.Fence()); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println(setBalance(90))
	locker.ForceRelease(ctx, "account/7") // an administrator frees the name: the lock is lost
	fmt.Println(errors.Is(setBalance(80), dlock.ErrNotHeld))
	var balance int
	db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 7`).Scan(&balance)
	fmt.Println(balance)
	// Output:
	// <nil>
	// true
	// 90
}

// testCheckHeld: a transaction guarded by CheckHeld commits its write
// while the lock is held, in each mode, and not once the lock was taken
// over (the adversary: a holder whose lease another Locker took, writing
// late), nor after a Resume moved it to another owner.
func testCheckHeld(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	a, b := newLocker(t, db, d, nil), newLocker(t, db, d, nil)
	check := func(k *dlock.Lock) error {
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		defer tx.Rollback()
		return sqllock.CheckHeld(t.Context(), tx, d, "", k)
	}
	for _, opts := range [][]dlock.Option{nil, {dlock.Shared()}, {dlock.WithLimit(2)}, {dlock.WithLockDelay(time.Minute)}} {
		name := testkit.UniqueName(t, "sqllock")
		k := testkit.MustTryAcquire(t, a, name, opts...)
		if err := check(k); err != nil {
			t.Errorf("CheckHeld of a held lock (%d options) = %v, want nil", len(opts), err)
		}
		r, err := b.Resume(t.Context(), k.Token())
		if err != nil {
			t.Fatalf("Resume = %v", err)
		}
		if err := check(k); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("CheckHeld of a resumed lock's old handle = %v, want ErrNotHeld", err)
		}
		if err := check(r); err != nil {
			t.Errorf("CheckHeld of the resumed lock = %v, want nil", err)
		}
		if _, err := b.ForceRelease(t.Context(), name); err != nil {
			t.Fatalf("ForceRelease = %v", err)
		}
		if err := check(r); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("CheckHeld after ForceRelease = %v, want ErrNotHeld", err)
		}
	}
}
