// Package redisconn is the little of a Redis client that redislock and
// redlock use: pipelines of commands (scripts, and Inspect's reads), one
// subscription, the masters of a Cluster, and how to close and what an
// error means. The drivers are written once against Conn; go-redis's
// implementation lives in the backends' own modules (internal/goredis), so
// a go-redis user's graph does not change, and each other client's lives
// in a module of its own (rueidisredis, valkeyredis), so its client reaches
// only its own users.
//
// It imports only the standard library and the driver package: it is in
// the root module so that the adapters' modules can import it.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// ErrNil is wrapped by the error of a reply that is Redis's null (a GET of a
// missing key, a script's false).
var ErrNil = errors.New("redis: nil")

// ErrClosed is wrapped by what a closed Conn's Subscribe returns.
var ErrClosed = errors.New("redis: client is closed")

// Cmd is one command: Name holds the command and the words that precede
// its keys (EVALSHA, the hash, the number of keys), then come Keys (which
// route it on a Cluster) and Args.
type Cmd struct {
	Name []string
	Keys []string
	Args []string
}

// Reply is a command's outcome. Val is nil, an int64, a string or a []any
// of those (a nested error as an error value); a null reply has Val nil
// and Err wrapping ErrNil.
type Reply struct {
	Val any
	Err error
}

// Conn is a Redis client as the drivers use it. Its methods are safe for
// concurrent use.
type Conn interface {
	// Pipeline sends cmds in order and returns their replies in the
	// same order: on one connection when they route to one node (so a
	// WAIT at the end counts the writes of the commands before it), else
	// split by node. A single command is sent alone.
	Pipeline(ctx context.Context, cmds []Cmd) []Reply

	// Subscribe subscribes to channel and calls fn with each message's
	// payload, and with ok false each time the server confirms the
	// subscription (the first time, and again after a reconnection, when
	// messages may have been lost). It reconnects by itself, keeps the
	// connection checked while quiet, and returns when ctx ends (nil) or
	// the server refuses the subscription (its error). fn is called from
	// one goroutine at a time and must not block.
	Subscribe(ctx context.Context, channel string, fn func(payload string, ok bool)) error

	// Masters returns a Conn on each master of a Cluster, or the Conn
	// itself alone.
	Masters(ctx context.Context) ([]Conn, error)

	// DB is the database the client selects, or -1 for a client over
	// several servers (a Cluster), which has no one database.
	DB() int

	// Classify says what an error of this client means to the core.
	Classify(err error) driver.ErrorKind

	// Close closes the client.
	Close() error
}

// KeyRouter is a Conn on a Cluster that can give the Conn of the master
// node that serves a key, so that a WAIT follows the scripts on their own
// connection. A Cluster's Conn without it cannot wait for replicas.
type KeyRouter interface {
	// MasterFor returns a Conn on key's master node.
	MasterFor(ctx context.Context, key string) (Conn, error)
	// Reload makes the client learn the cluster's slots again (after a
	// MOVED reply that a node's Conn did not follow).
	Reload(ctx context.Context)
}

// Clustered is implemented by a Conn on a Cluster.
type Clustered interface {
	Cluster() bool
}

// IsCluster reports whether c is a Conn on a Cluster.
func IsCluster(c Conn) bool {
	cl, ok := c.(Clustered)
	return ok && cl.Cluster()
}

// Slice returns the reply as an array, or its error, or an error if it is
// not an array.
func (r Reply) Slice() ([]any, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	v, ok := r.Val.([]any)
	if !ok {
		return nil, fmt.Errorf("redis: unexpected type=%T for Slice", r.Val)
	}
	return v, nil
}

// Int64 returns the reply as an integer, or its error, or an error if it
// is not an integer.
func (r Reply) Int64() (int64, error) {
	if r.Err != nil {
		return 0, r.Err
	}
	switch v := r.Val.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("redis: unexpected type=%T for Int64", r.Val)
}

// Args returns the words of vs as Redis receives them: strings as they
// are, integers in decimal, byte slices as their bytes, bools as 1 or 0.
func Args(vs ...any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case string:
			out[i] = v
		case []byte:
			out[i] = string(v)
		case int:
			out[i] = strconv.Itoa(v)
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		case uint64:
			out[i] = strconv.FormatUint(v, 10)
		case bool:
			out[i] = "0"
			if v {
				out[i] = "1"
			}
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}

// NewRedislock is redislock's constructor on a Conn, for the adapters of
// other clients, also returning the driver under the Locker (for their
// tests); redislock sets it in its init, so an adapter that imports
// redislock finds it set. opts is a *redislock.Options (nil means
// defaults); with own set, the Locker's Close closes c.
var NewRedislock func(c Conn, opts any, own bool) (*dlock.Locker, driver.Driver, error)

// NewRedlock is redlock's constructor on one Conn per master, for the
// adapters of other clients, also returning the driver under the Locker
// (for their tests); redlock sets it in its init, so an adapter that
// imports redlock finds it set. opts is a *redlock.Options (nil means
// defaults); with own set, the Locker's Close closes the Conns.
var NewRedlock func(masters []Conn, opts any, own bool) (*dlock.Locker, driver.Driver, error)
