package main

import (
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// Backend is a store dlock runs on. Only Redis is wired in now, where the
// peers (redsync, bsm/redislock) run too. Other dlock backends
// (PostgreSQL, MySQL, SQLite, ZooKeeper, etcd) plug in here as they land:
// implement Backend, start its server in main, and add dlockLib(b) to the
// scenarios' lists, dlock only. The Redis-only figures (PING floor,
// INFO commandstats, INFO memory) stay Redis-only.
type Backend interface {
	// Name labels the backend in the report, e.g. "redis".
	Name() string
	// Open returns a new Locker on the server at addr, and a func that
	// closes it together with whatever Open made for it (clients). Each
	// Locker is a distinct owner identity.
	Open(addr string) (*dlock.Locker, func() error, error)
}

// redisBackend is dlock's Redis backend, default options, over a go-redis
// client with default options counted by trips.
type redisBackend struct{}

func (redisBackend) Name() string { return "redis" }

func (redisBackend) Open(addr string) (*dlock.Locker, func() error, error) {
	c := newClient(addr)
	l, err := redislock.New(c, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return l, func() error { return errors.Join(l.Close(), c.Close()) }, nil
}
