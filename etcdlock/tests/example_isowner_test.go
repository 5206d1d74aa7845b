package etcdlock_test

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/etcdlock"
)

// A business write committed only while the lock is still held, in the
// same transaction: the etcd counterpart of concurrency.Mutex.IsOwner.
// (Needs a server: compiled, not run. TestIsOwner runs it.)
func ExampleIsOwner() {
	ctx := context.Background()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	locker, err := etcdlock.New(client, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	lock, err := locker.Acquire(ctx, "billing")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lock.Release(ctx)

	resp, err := client.Txn(ctx).
		If(etcdlock.IsOwner(lock)).
		Then(clientv3.OpPut("/invoices/2024-06", "sent")).
		Commit()
	switch {
	case err != nil:
		fmt.Println(err)
	case !resp.Succeeded:
		fmt.Println("the lock was lost: nothing written")
	}
}
