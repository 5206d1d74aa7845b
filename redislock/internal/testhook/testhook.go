// Package testhook gives redislock's test module (redislock/tests) what it
// checks of redislock's internals. redislock sets the variables in its
// init; no program outside redislock's directory can import this package.
package testhook

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// InspectHash runs the second step of Inspect, the script that reads a
// key held shared or as a semaphore, on key.
var InspectHash func(ctx context.Context, c redis.UniversalClient, key string) ([]any, error)

// Scripts are redislock's scripts by name (the Go variable's, without
// "Script"), for the test that every one assembles and compiles.
var Scripts map[string]*luascript.Script

// ScriptVars are the values the scripts' placeholders take, for tests
// that assemble parts of them in other combinations (a fast path alone,
// the general path without it).
var ScriptVars map[string]string

// ParseValue decodes an exclusive holder's value (or a tombstone, whose
// owner is empty), in the packed form or the decimal form of earlier
// versions: the owner, the fence and what follows the stamp.
var ParseValue func(v string) (owner string, fence uint64, rest string, ok bool)

// New is redislock.New(client, nil), also returning the driver under
// the Locker, for dlocktest's Harness.LockerAndDriver and for tests of
// the driver's steps. (It cannot take a *redislock.Options: redislock
// imports this package.)
var New func(client redis.UniversalClient) (*dlock.Locker, driver.Driver, error)
