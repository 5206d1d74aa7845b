package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// tokenWorker is a worker process (see TestMain): args are a store URL,
// a lock name, a TTL and a lock-delay. It takes the lock (renewed) and
// prints "token TOKEN"; when its Done closes it prints "lost", then
// "release" and whether its Release got ErrNotHeld; on SIGTERM it
// releases and prints "released" with the error.
func tokenWorker(ctx context.Context, args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("token: want STORE NAME TTL DELAY, got %q", args)
	}
	ttl, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	delay, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	l, err := dlock.Open(ctx, args[0])
	if err != nil {
		return err
	}
	defer l.Close()
	k, err := l.Acquire(ctx, args[1], dlock.WithTTL(ttl), dlock.WithLockDelay(delay))
	if err != nil {
		return err
	}
	fmt.Println("token", k.Token())
	select {
	case <-k.Done():
		fmt.Println("lost")
		err := k.Release(context.Background())
		fmt.Println("release notheld", errors.Is(err, dlock.ErrNotHeld))
	case <-ctx.Done():
		fmt.Println("released", k.Release(context.Background()))
	}
	return nil
}
