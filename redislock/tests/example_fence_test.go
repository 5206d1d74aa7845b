package redislock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock"
)

// A fenced value in Redis: one hash per key, written by one script. The
// token is the holder's lock.Fence().
func Example_fence() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	ctx := context.Background()

	store := redislock.NewFence(client)
	if err := store.Write(ctx, "report/2024", 42, []byte("written by 42")); errors.Is(err, fence.ErrStale) {
		fmt.Println("the lock was lost: a newer holder has written")
	}
}
