package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/memlock"
)

// Deduct stock without overselling: every buyer takes the lock on the item
// before reading and writing its stock. With Redis, replace memlock.New(nil)
// by redislock.New(redisClient, nil); nothing else changes.
func Example() {
	locker, _ := memlock.New(nil) // memlock.New cannot fail
	defer locker.Close()

	stock := 10 // stands for a row in a database
	var sold int
	var mu sync.Mutex // only for counting sold in this example
	var wg sync.WaitGroup
	for range 25 {
		wg.Go(func() {
			ctx := context.Background()
			lock, err := locker.Acquire(ctx, "stock/sku-42", dlock.WithTTL(10*time.Second))
			if err != nil {
				fmt.Println("acquire:", err)
				return
			}
			defer lock.Release(ctx)
			if stock > 0 { // read-modify-write under the lock
				stock--
				mu.Lock()
				sold++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("sold:", sold, "left:", stock)
	// Output: sold: 10 left: 0
}

func ExampleLocker_TryAcquire() {
	locker, _ := memlock.New(nil) // memlock.New cannot fail
	defer locker.Close()
	ctx := context.Background()

	lock, _ := locker.TryAcquire(ctx, "cron/nightly-report")
	_, err := locker.TryAcquire(ctx, "cron/nightly-report")
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	lock.Release(ctx)
	// Output: true
}

// A function that takes the lock can call another that takes it again:
// passing the lock's Context re-enters it, with the same fencing token.
func ExampleLock_Context() {
	locker, _ := memlock.New(nil) // memlock.New cannot fail
	defer locker.Close()

	outer, _ := locker.Acquire(context.Background(), "account/7")
	inner, err := locker.Acquire(outer.Context(), "account/7")
	fmt.Println(err, inner.Fence() == outer.Fence())
	inner.Release(context.Background()) // still held by outer
	outer.Release(context.Background()) // now free
	<-outer.Context().Done()
	fmt.Println(context.Cause(outer.Context()))
	// Output:
	// <nil> true
	// dlock: lock released
}

// Done closes when the lock is lost, here because an administrator deleted
// it; work under the lock should stop.
func ExampleLock_Done() {
	store := memlock.NewStore()
	locker, _ := memlock.New(store)
	defer locker.Close()

	lock, _ := locker.Acquire(context.Background(), "leader", dlock.WithTTL(300*time.Millisecond))
	store.Expire("leader")
	<-lock.Done() // noticed at the next renewal, within TTL/3
	fmt.Println(errors.Is(context.Cause(lock.Context()), dlock.ErrLost))
	// Output: true
}

// Leader-only work: of the Lockers that campaign for a name, one at a time
// runs the work, and another takes over if it loses the lock.
func ExampleLocker_Lead() {
	store := memlock.NewStore()
	locker, _ := memlock.New(store)
	defer locker.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	err := locker.Lead(ctx, "cron/leader", func(ctx context.Context) error {
		fmt.Println("leading: running the nightly job")
		return nil // done: Lead releases the name and returns
	})
	fmt.Println("Lead returned:", err)
	// Output:
	// leading: running the nightly job
	// Lead returned: <nil>
}

// A transfer between two accounts takes both locks, in an order that
// cannot deadlock with a transfer the other way.
func ExampleLocker_AcquireAll() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	ctx := context.Background()

	locks, err := locker.AcquireAll(ctx, []string{"account/bob", "account/alice"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range locks {
		fmt.Println("holding", k.Name())
		defer k.Release(ctx)
	}
	// Output:
	// holding account/bob
	// holding account/alice
}

// Do runs a function under the lock and releases it afterwards.
func ExampleLocker_Do() {
	locker, _ := memlock.New(nil)
	defer locker.Close()

	err := locker.Do(context.Background(), "stock/sku-42", func(ctx context.Context) error {
		fmt.Println("deducting stock")
		return nil
	})
	fmt.Println("Do returned:", err)
	// Output:
	// deducting stock
	// Do returned: <nil>
}
