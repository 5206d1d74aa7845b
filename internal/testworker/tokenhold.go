package testworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// TokenHold is a worker for any backend, for Lock.Token and lock-delay
// tests: args are a store URL (its backend must be imported by the test
// package), a lock name, a TTL and a lock-delay. It takes the lock
// (renewed) and prints "token TOKEN"; when its Done closes it prints
// "lost", then "release notheld" and whether its Release got
// ErrNotHeld; on SIGTERM it releases and prints "released" with the
// error.
func TokenHold(ctx context.Context, args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("tokenhold: want STORE NAME TTL DELAY, got %q", args)
	}
	l, name, ttl, err := OpenStore(ctx, "tokenhold", args[:3])
	if err != nil {
		return err
	}
	defer l.Close()
	delay, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	k, err := l.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithLockDelay(delay))
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
