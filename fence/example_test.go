package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/fence"
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

// Fence an UPDATE of the application's own table, which keeps each row's
// token in a column of its own, here in the caller's transaction on
// PostgreSQL. (sqllock's test module runs the same on SQLite.)
func ExampleUpdate() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db.example.com/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	token := uint64(42) // lock.Fence() of the lock that guards account 7

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	u := fence.Update{
		Placeholder: fence.Dollar,
		Table:       "accounts",
		Set:         []fence.Column{{Name: "balance", Value: 90}},
		Where:       []fence.Column{{Name: "id", Value: 7}},
	}
	// UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND COALESCE(fence, 0) <= $2
	err = u.Exec(ctx, tx, token)
	if errors.Is(err, fence.ErrStale) {
		fmt.Println("the lock was lost: a newer holder has written")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tx.Commit())
}
