// Package testhook gives redlock's test module (redlock/tests) what it
// checks of redlock's internals. redlock sets the variables in its init;
// no program outside redlock's directory can import this package.
package testhook

import (
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// NewDriver returns the driver New wraps (default options), with pause
// (if not nil) called by Acquire after the token is written back and
// before validity is checked.
var NewDriver func(clients []redis.UniversalClient, pause func()) (driver.Driver, error)

// Scripts are redlock's scripts by name (the Go variable's, without
// "Script"), for the test that every one assembles and compiles.
var Scripts map[string]*luascript.Script

// MasterOptions returns the options of the client Open makes for the
// master at addr (no user, password or TLS), for the tests of what a step
// on a dead master costs.
var MasterOptions func(addr string) *redis.Options

// New is redlock.New(clients, nil), also returning the driver under
// the Locker, for dlocktest's Harness.LockerAndDriver. (It cannot take a
// *redlock.Options: redlock imports this package.)
var New func(clients []redis.UniversalClient) (*dlock.Locker, driver.Driver, error)
