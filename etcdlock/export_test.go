package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// Wakeups returns how many times a queued waiter has been woken by a
// delete event since the process started.
func Wakeups() int64 { return wakeups.Load() }

// Queued returns how many keys of the lock on name (under DefaultPrefix)
// wait: all but those that hold, whatever their modes.
func Queued(ctx context.Context, cli *clientv3.Client, name string) int {
	return QueuedUnder(ctx, cli, DefaultPrefix, name)
}

// QueuedUnder is Queued for the keys under prefix.
func QueuedUnder(ctx context.Context, cli *clientv3.Client, prefix, name string) int {
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

// ForgedRelease and ForgedRefresh release and refresh, through a driver
// of their own on cli, the lock on name under prefix as if they were
// owner: what a neighbour could do with a handle it made up.
func ForgedRelease(ctx context.Context, cli *clientv3.Client, prefix, name, owner string) error {
	d, _, err := newDriver(cli, &Options{Prefix: prefix}, false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Release(ctx, driver.Lease{Name: name, Owner: owner, TTL: time.Minute})
}

func ForgedRefresh(ctx context.Context, cli *clientv3.Client, prefix, name, owner string) error {
	d, _, err := newDriver(cli, &Options{Prefix: prefix}, false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Refresh(ctx, []driver.Lease{{Name: name, Owner: owner, TTL: time.Minute}})[0]
}

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }
