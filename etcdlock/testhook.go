package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.DefaultPrefix = DefaultPrefix
	testhook.New = func(cli *clientv3.Client) (*dlock.Locker, driver.Driver, error) {
		l, d, err := newLocker(cli, nil)
		if err != nil {
			return nil, nil, err
		}
		return l, d, nil
	}
	testhook.Wakeups = wakeups.Load
	testhook.Waiting = waiting.Load
	testhook.QueuedUnder = queuedUnder
	testhook.ForgedRelease = func(ctx context.Context, cli *clientv3.Client, prefix, name, owner string) error {
		return forged(cli, prefix, func(d driver.Driver) error {
			return d.Release(ctx, driver.Lease{Name: name, Owner: owner, TTL: time.Minute})
		})
	}
	testhook.ForgedRefresh = func(ctx context.Context, cli *clientv3.Client, prefix, name, owner string) error {
		return forged(cli, prefix, func(d driver.Driver) error {
			return d.Refresh(ctx, []driver.Lease{{Name: name, Owner: owner, TTL: time.Minute}})[0]
		})
	}
}

func queuedUnder(ctx context.Context, cli *clientv3.Client, prefix, name string) int {
	resp, err := cli.Get(ctx, Key(prefix, name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return 0
	}
	d := &etcdDriver{prefix: prefix}
	modes := make([]sessionlock.Mode, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		modes[i], _ = d.parseKey(kv.Key)
	}
	return len(modes) - sessionlock.Holding(modes)
}

func forged(cli *clientv3.Client, prefix string, step func(driver.Driver) error) error {
	d, _, err := newDriver(cli, &Options{Prefix: prefix}, false)
	if err != nil {
		return err
	}
	defer d.Close()
	return step(d)
}
