package main

import (
	"context"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/rueidisredis"
)

// The rueidis contenders (issue 30): dlock's redislock on a rueidis
// client, and rueidis's own lock, rueidislock.
const (
	keyDlockRueidis = "dlock-rueidis"
	keyRueidislock  = "rueidislock"
)

// rueidisBackend is dlock's Redis backend, default options, over a
// rueidis client (client-side caching off: dlock reads nothing through
// it) counted by trips.
type rueidisBackend struct{}

func (rueidisBackend) Name() string { return "rueidis" }

func (rueidisBackend) Open(addr string) (*dlock.Locker, func() error, error) {
	c, err := newRueidisClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	l, err := rueidisredis.NewLocker(c, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return l, func() error { err := l.Close(); c.Close(); return err }, nil
}

// rueidislockLib is rueidislock with its defaults (3 keys, a majority of
// 2; waiters woken by client-side caching's invalidations) but for the
// lease: KeyValidity is the benchmark's TTL, as every library's lease.
var rueidislockLib = lib{key: keyRueidislock, label: "rueidislock (defaults, KeyValidity = TTL)", short: "rueidislock", open: func(addr string, ttl time.Duration) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:  rueidis.ClientOption{InitAddress: []string{addr}},
		ClientBuilder: newRueidisClient,
		KeyValidity:   ttl,
	})
	if err != nil {
		return nil, err
	}
	return &rueidisLocker{l: l}, nil
}}

// rueidisLocker: one rueidislock Locker. A rueidislock lock lives as
// long as the context it was taken with (or until its cancel func, which
// deletes its keys and returns), where the other libraries' locks outlive
// the call's context: lock takes it with a context of its own, which the
// call's context ends only while waiting.
type rueidisLocker struct{ l rueidislock.Locker }

func (r *rueidisLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	held, end := context.WithCancel(context.WithoutCancel(ctx))
	stopWaiting := context.AfterFunc(ctx, end)
	_, cancel, err := r.l.WithContext(held, name)
	if !stopWaiting() { // ctx ended: the lock, if taken, is ending
		if err == nil {
			cancel()
		}
		end()
		return nil, ctx.Err()
	}
	if err != nil {
		end()
		return nil, err
	}
	return func(context.Context) error { cancel(); end(); return nil }, nil
}

func (r *rueidisLocker) close() error { r.l.Close(); return nil }

// newRueidisClient returns a rueidis client counted by trips.
func newRueidisClient(o rueidis.ClientOption) (rueidis.Client, error) {
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, err
	}
	return countedClient{c}, nil
}

// countedClient counts a rueidis client's requests in trips as
// tripCounter counts go-redis's: one per command (Do; DoCache unless
// served from the client's cache), one per pipeline (DoMulti); like
// go-redis's, subscriptions (Receive) are counted from the server's side
// (see roundTrips). rueidis writes concurrent commands together,
// so these are requests, as go-redis's are, not system calls.
type countedClient struct{ rueidis.Client }

func (c countedClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	trips.count(tripName(cmd.Commands()))
	return c.Client.Do(ctx, cmd)
}

func (c countedClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) == 1 {
		trips.count(tripName(cmds[0].Commands()))
	} else {
		trips.count("pipeline")
	}
	return c.Client.DoMulti(ctx, cmds...)
}

func (c countedClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	r := c.Client.DoCache(ctx, cmd, ttl)
	if !r.IsCacheHit() {
		trips.count(tripName(cmd.Commands()))
	}
	return r
}

// tripName names a request as tripCounter does: the command, and for
// EVALSHA the script's SHA1 prefix.
func tripName(words []string) string {
	if len(words) == 0 {
		return "?"
	}
	name := strings.ToLower(words[0])
	if name == "evalsha" && len(words) > 1 && len(words[1]) >= 8 {
		name += ":" + words[1][:8]
	}
	return name
}
