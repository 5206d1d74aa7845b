// Package redislock is the dlock backend for Redis: a single node, a
// Sentinel-managed master, or a Redis Cluster, through the user's own
// go-redis client.
//
// Each step is one Lua script run with EVALSHA: acquire takes the lock if
// it is free (or re-enters an acquisition whose reply was lost), refresh
// and release compare the owner first. Release publishes on the lock's
// channel, and waiters of one Locker share one pub/sub connection.
//
// # Keys
//
// A lock on name lives in one string key, Prefix + "{" + escaped name + "}",
// whose value is "owner|fence" while held. The braces make the whole
// escaped name the key's hash tag, so every key and channel of one lock
// map to the same Cluster slot; '{', '}' and '%' in names are
// percent-escaped so a name cannot pick another name's tag. The release
// channel is the key followed by ":released".
//
// # Fencing tokens
//
// The token is the Redis server's TIME in microseconds at acquisition,
// raised to one more than the previous token if the key still remembers
// one. On release the key is not deleted but replaced by a tombstone
// "|fence" that expires after TombstoneTTL, so a release followed at once
// by an acquisition still counts up even if the server's clock stepped
// back; nothing stays behind per name once the tombstone expires. Tokens
// therefore strictly increase as long as the server's clock does not step
// back by more than TombstoneTTL, or, after a failover to a replica that
// lost the latest writes, as long as the new master's clock is not behind
// the old one's by more than the failover took. (Without persistence a
// failover can also lose a held lock outright; that is Redis's
// replication model, and why the tokens exist.)
//
// Requires Redis 5 or later (scripts replicated by effects, for TIME).
package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "dlock:"

	// TombstoneTTL is how long a released lock's key keeps its last
	// fencing token.
	TombstoneTTL = 5 * time.Second
)

// Options configures a Redis Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every key and channel dlock uses.
	// Default: DefaultPrefix.
	Prefix string

	// MaxRetryInterval bounds how long a waiter waits for a wake-up
	// before trying again (a waiter never waits longer than the holder's
	// remaining lease either). Default: dlock.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the Redis server behind client: a *redis.Client,
// a *redis.ClusterClient, or a Sentinel failover client. The Locker does
// not close client. A nil opts means defaults.
func New(client redis.UniversalClient, opts *Options) *dlock.Locker {
	return newLocker(client, opts, false)
}

func newLocker(client redis.UniversalClient, opts *Options, ownClient bool) *dlock.Locker {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	d := &redisDriver{c: client, prefix: o.Prefix, sub: newSubscriber(client), ownClient: ownClient}
	return dlock.New(d, &dlock.Config{MaxRetryInterval: o.MaxRetryInterval})
}

// Key returns the Redis key that holds the lock on name under prefix (""
// means DefaultPrefix), for inspection and administrative deletion.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + "{" + escaper.Replace(name) + "}"
}

var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func channel(key string) string { return key + ":released" }

type redisDriver struct {
	c         redis.UniversalClient
	prefix    string
	sub       *subscriber
	ownClient bool // made by Open: Close closes it
}

func (d *redisDriver) key(name string) string { return Key(d.prefix, name) }

func ms(d time.Duration) int64 { return d.Milliseconds() }

func (d *redisDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	vals, err := acquireScript.Run(ctx, d.c, []string{d.key(l.Name)}, l.Owner, ms(l.TTL), l.Metadata).Slice()
	if err != nil {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
	}
	if len(vals) != 2 {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: unexpected reply %v", l.Name, vals)
	}
	if ok, _ := vals[0].(int64); ok == 0 {
		pttl, _ := vals[1].(int64)
		return driver.Result{Remaining: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
	}
	s, _ := vals[1].(string)
	fence, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: bad fencing token %q", l.Name, s)
	}
	return driver.Result{Acquired: true, Fence: fence}, nil
}

func (d *redisDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	cmds := make([]*redis.Cmd, len(ls))
	run := func(eval bool) {
		pipe := d.c.Pipeline()
		for i, l := range ls {
			if cmds[i] != nil && !isNoScript(cmds[i].Err()) {
				continue
			}
			keys, args := []string{d.key(l.Name)}, []any{l.Owner, ms(l.TTL)}
			if eval {
				cmds[i] = refreshScript.Eval(ctx, pipe, keys, args...)
			} else {
				cmds[i] = refreshScript.EvalSha(ctx, pipe, keys, args...)
			}
		}
		pipe.Exec(ctx) // errors are read per command below
	}
	run(false)
	for _, c := range cmds {
		if isNoScript(c.Err()) {
			run(true) // the server lost its script cache (restart, failover)
			break
		}
	}
	for i, c := range cmds {
		n, err := c.Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redislock: refresh %q: %w", ls[i].Name, err)
		case n == 0:
			errs[i] = fmt.Errorf("redislock: refresh %q: %w", ls[i].Name, driver.ErrNotHeld)
		}
	}
	return errs
}

func (d *redisDriver) Release(ctx context.Context, l driver.Lease) error {
	key := d.key(l.Name)
	n, err := releaseScript.Run(ctx, d.c, []string{key}, l.Owner, ms(TombstoneTTL), channel(key)).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redislock: release %q: %w", l.Name, err)
	case n == 0:
		return fmt.Errorf("redislock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
}

func (d *redisDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.sub.watch(ctx, channel(d.key(name)))
}

func (d *redisDriver) Close() error {
	err := d.sub.close()
	if d.ownClient {
		err = errors.Join(err, d.c.Close())
	}
	return err
}

func isNoScript(err error) bool {
	return err != nil && !errors.Is(err, redis.Nil) && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
