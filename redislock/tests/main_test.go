package redislock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redislock"
)

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{
		"hold":      testworker.Hold,
		"count":     countWorker,
		"ping":      pingWorker,
		"tokenhold": testworker.TokenHold,
	})
	os.Exit(m.Run())
}

// countWorker runs args[2] goroutines on the Redis at args[0], each doing
// args[3] rounds of: take args[1], read the counter key, write it plus one
// and append the fencing token to a list, release. It prints "done".
func countWorker(ctx context.Context, args []string) error {
	goroutines, _ := strconv.Atoi(args[2])
	rounds, _ := strconv.Atoi(args[3])
	name := args[1]
	client := redis.NewClient(&redis.Options{Addr: args[0]})
	defer client.Close()
	l, err := redislock.New(client, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				if err := countOnce(ctx, client, l, name); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

func countOnce(ctx context.Context, client *redis.Client, l *dlock.Locker, name string) error {
	k, err := l.Acquire(ctx, name)
	if err != nil {
		return err
	}
	n, err := client.Get(ctx, name+":counter").Int()
	if err != nil && err != redis.Nil {
		return err
	}
	if err := client.Set(ctx, name+":counter", n+1, 0).Err(); err != nil {
		return err
	}
	if err := client.RPush(ctx, name+":fences", k.Fence()).Err(); err != nil {
		return err
	}
	return k.Release(ctx)
}

// pingWorker reaches the Redis at args[1] once, through dlock.Open if
// args[0] is "open" and through a plain go-redis client otherwise, and
// prints the outcome on standard output, so that whatever appears on
// standard error was written by go-redis.
func pingWorker(ctx context.Context, args []string) error {
	if args[0] == "open" {
		l, err := dlock.Open(ctx, "redis://"+args[1])
		if err == nil {
			l.Close()
		}
		fmt.Println("done", err)
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: args[1]})
	defer c.Close()
	fmt.Println("done", c.Ping(ctx).Err())
	return nil
}
