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
	locker, _ := memlock.New(nil)
	defer locker.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// Leader-only work: a loop that runs while this process leads. Its
	// ctx ends if leadership is lost; Lead then campaigns again.
	rounds := 0
	err := locker.Lead(ctx, "cron/leader", func(ctx context.Context) error {
		fmt.Println("leading")
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
				rounds++
				fmt.Println("leader-only round", rounds)
				if rounds == 3 {
					stop() // shutting down: Lead returns ctx's error
				}
			}
		}
	})
	fmt.Println("Lead returned after shutdown:", errors.Is(err, context.Canceled))
	// Output:
	// leading
	// leader-only round 1
	// leader-only round 2
	// leader-only round 3
	// Lead returned after shutdown: true
}

func ExampleLocker_AcquireAll() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	ctx := context.Background()
	balances := map[string]int{"account/alice": 100, "account/bob": 20}

	// A transfer locks both accounts. AcquireAll takes them in one global
	// order, so a transfer from bob to alice at the same time cannot
	// deadlock with this one; on error it holds neither.
	transfer := func(from, to string, amount int) error {
		locks, err := locker.AcquireAll(ctx, []string{from, to}, dlock.WithTTL(10*time.Second))
		if err != nil {
			return err
		}
		defer func() {
			for _, k := range locks {
				k.Release(ctx)
			}
		}()
		if balances[from] < amount {
			return fmt.Errorf("%s has %d, cannot send %d", from, balances[from], amount)
		}
		balances[from] -= amount
		balances[to] += amount
		return nil
	}
	fmt.Println(transfer("account/alice", "account/bob", 30))
	fmt.Println(transfer("account/bob", "account/alice", 80))
	fmt.Println(balances["account/alice"], balances["account/bob"])
	// Output:
	// <nil>
	// account/bob has 50, cannot send 80
	// 70 50
}

func ExampleShared() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	ctx := context.Background()
	cache := map[string]string{}

	// The rebuild holds the name exclusively: no reader sees a half-built
	// cache.
	w, err := locker.Acquire(ctx, "cache/products")
	if err != nil {
		fmt.Println(err)
		return
	}
	cache["42"] = "teapot"
	fmt.Println("rebuilt under fence", w.Fence())
	w.Release(ctx)

	// Readers hold it together, each with a lease of its own.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seen []string
	for range 3 {
		wg.Go(func() {
			r, err := locker.Acquire(ctx, "cache/products", dlock.Shared())
			if err != nil {
				fmt.Println(err)
				return
			}
			defer r.Release(ctx)
			mu.Lock()
			seen = append(seen, cache["42"])
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Println(seen)
	// Output:
	// rebuilt under fence 1
	// [teapot teapot teapot]
}

func ExampleWithLimit() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	ctx := context.Background()

	// At most 3 exports at once, whatever the number of workers.
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		running, most int
	)
	for range 10 {
		wg.Go(func() {
			err := locker.Do(ctx, "exports", func(ctx context.Context) error {
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // the export
				mu.Lock()
				running--
				mu.Unlock()
				return nil
			}, dlock.WithLimit(3))
			if err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	fmt.Println("never more than 3 at once:", most <= 3)
	// Output:
	// never more than 3 at once: true
}

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
