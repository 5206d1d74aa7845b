package etcdlock

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/sessionlock"
)

// Wakeups returns how many times a queued waiter has been woken by a
// delete event since the process started.
func Wakeups() int64 { return wakeups.Load() }

// Queued returns how many keys of the lock on name (under DefaultPrefix)
// wait: all but those that hold, whatever their modes.
func Queued(ctx context.Context, cli *clientv3.Client, name string) int {
	resp, err := cli.Get(ctx, Key("", name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return 0
	}
	d := &etcdDriver{prefix: DefaultPrefix}
	modes := make([]sessionlock.Mode, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		modes[i], _ = d.parseKey(kv.Key)
	}
	return len(modes) - sessionlock.Holding(modes)
}
