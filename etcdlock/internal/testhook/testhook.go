// Package testhook gives etcdlock's test module (etcdlock/tests) what it
// checks of etcdlock's internals. etcdlock sets the variables in its init;
// no program outside etcdlock's directory can import this package.
package testhook

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var (
	// New is etcdlock.New(cli, nil), also returning the driver under the
	// Locker, for dlocktest's Harness.LockerAndDriver. (It cannot take an
	// *etcdlock.Options: etcdlock imports this package.)
	New func(cli *clientv3.Client) (*dlock.Locker, driver.Driver, error)

	// Wakeups returns how many times a queued waiter has been woken by a
	// delete event since the process started.
	Wakeups func() int64

	// Waiting returns how many waits are blocked now, each on the
	// deletion of its predecessors as the Locker's view of their queue
	// sees it.
	Waiting func() int64

	// QueuedUnder returns how many keys of the lock on name under prefix
	// wait: all but those that hold, whatever their modes.
	QueuedUnder func(ctx context.Context, cli *clientv3.Client, prefix, name string) int

	// ForgedRelease and ForgedRefresh release and refresh, through a
	// driver of their own on cli, the lock on name under prefix as if
	// they were owner: what a neighbour could do with a handle it made up.
	ForgedRelease, ForgedRefresh func(ctx context.Context, cli *clientv3.Client, prefix, name, owner string) error

	// UnheldRelease, when set, is called by each release of a lease that
	// the driver does not hold (one given up by its caller) with the
	// outcome of its look for the owner's key.
	UnheldRelease atomic.Pointer[func(err error)]
)

// DefaultPrefix is etcdlock.DefaultPrefix, for Queued.
var DefaultPrefix string

// Queued is QueuedUnder for DefaultPrefix.
func Queued(ctx context.Context, cli *clientv3.Client, name string) int {
	return QueuedUnder(ctx, cli, DefaultPrefix, name)
}
