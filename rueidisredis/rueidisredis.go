// Package rueidisredis runs dlock's Redis backends on rueidis clients
// (github.com/redis/rueidis) instead of go-redis: redislock (NewLocker)
// on a single node, a Sentinel-managed master (ClientOption.Sentinel) or
// a Redis Cluster (several InitAddress), and redlock (NewRedlock) on one
// client per master, with the same keys, scripts and guarantees, so
// Lockers on either client share names. It is a module of its own, so
// that rueidis reaches only the programs that import it.
//
// A Locker's resume tokens (Lock.Token) name its key prefix alone:
// rueidis does not say which database a client selects, so give Lockers
// on different databases of one server different prefixes if a token of
// one must not resume on the other. Options.WaitReplicas works on a
// single node and Sentinel, not on a Cluster (rueidis does not route a
// pipeline to a key's master on one connection). redislock.Fence takes
// a go-redis client.
//
// # Store URLs
//
// Importing the package registers redis+rueidis://[user:pass@]host[:port][/db]
// with dlock.Open: a single node, with the query parameter prefix
// (Options.Prefix). Its Lockers' tokens name the database too. It also
// registers redlock+rueidis://[user:pass@]host:port,host:port,host:port
// for redlock, one client per master, with the query parameters prefix
// and clock_bound (redlock.Options); like redlock://, Open returns once a
// majority of the masters answer. Both speak TLS with tls=true or any of
// the tls_ parameters (tls_ca, tls_cert, tls_key, tls_server_name,
// tls_insecure_skip_verify), as redis:// and redlock:// do.
//
// # Example
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}})
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	locker, err := rueidisredis.NewLocker(client, nil) // the Locker does not close client
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "stock/sku-42", dlock.WithTTL(10*time.Second))
package rueidisredis

import (
	"fmt"

	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisconn"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/rueidisredis/internal/testhook"
)

// NewLocker returns a redislock Locker on the Redis server behind client.
// The Locker does not close client. A nil opts means defaults (see
// redislock.Options). A nil client or invalid Options get an error
// wrapping dlock.ErrInvalid.
func NewLocker(client rueidis.Client, opts *redislock.Options) (*dlock.Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("rueidisredis: new: nil client: %w", dlock.ErrInvalid)
	}
	l, _, err := redisconn.NewRedislock(newConn(client, -1), opts, false)
	return l, err
}

// NewRedlock returns a redlock Locker over independent Redis masters, one
// rueidis client each (a single node or a Sentinel-managed master, not a
// Cluster); there must be at least three, and an odd number is best. The
// Locker does not close them. A nil opts means defaults (see
// redlock.Options). Fewer than three clients, a nil one, one on a
// Cluster, or invalid Options get an error wrapping dlock.ErrInvalid.
func NewRedlock(clients []rueidis.Client, opts *redlock.Options) (*dlock.Locker, error) {
	masters, err := masterConns(clients)
	if err != nil {
		return nil, err
	}
	l, _, err := redisconn.NewRedlock(masters, opts, false)
	return l, err
}

// masterConns returns a Conn on each of clients, or an error if one is
// nil.
func masterConns(clients []rueidis.Client) ([]redisconn.Conn, error) {
	masters := make([]redisconn.Conn, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("rueidisredis: new: master %d is nil: %w", i, dlock.ErrInvalid)
		}
		masters[i] = newConn(c, -1)
	}
	return masters, nil
}

// init gives the test module the Conn on a client (see package testhook).
func init() {
	testhook.Conn = func(c rueidis.Client) redisconn.Conn { return newConn(c, -1) }
	testhook.Masters = masterConns
}
