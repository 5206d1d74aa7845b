package etcdlock_test

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/fence"
)

// A fenced value in etcd: the token is stored in front of the value and
// compared in the write's transaction. The token is the holder's
// lock.Fence().
func Example_fence() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	store := etcdlock.NewFence(client)
	if err := store.Write(ctx, "/reports/2024", 42, []byte("written by 42")); errors.Is(err, fence.ErrStale) {
		fmt.Println("the lock was lost: a newer holder has written")
	}
	value, token, err := store.Read(ctx, "/reports/2024")
	fmt.Println(string(value), token, err)
}
