// Package testhook gives zklock's test module (zklock/tests) what it
// checks of zklock's internals. zklock sets the variables in its init; no
// program outside zklock's directory can import this package.
package testhook

import (
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var (
	// Wakeups returns how many times a queued waiter has been woken by a
	// watch event since the process started.
	Wakeups func() int64

	// Queued returns how many children of the lock on name (under
	// zklock.DefaultPrefix) wait: all but those that hold, whatever their
	// modes.
	Queued func(conn *zk.Conn, name string) int

	// New is zklock.New(conn, nil), also returning the driver under the
	// Locker, for dlocktest's Harness.LockerAndDriver. (It cannot take a
	// *zklock.Options: zklock imports this package.)
	New func(conn *zk.Conn) (*dlock.Locker, driver.Driver, error)

	// AfterCreate, when set, is called by a waiter's Join between the
	// create of its child and the read of its place: a test makes a
	// holder leave there.
	AfterCreate atomic.Pointer[func(path string)]

	// UnheldRelease, when set, is called by each release of a lease that
	// the driver does not hold (one given up by its caller), with
	// whether a create of its owner's may have been applied unseen and
	// the outcome of the look for the owner's children.
	UnheldRelease atomic.Pointer[func(unsure bool, err error)]
)
