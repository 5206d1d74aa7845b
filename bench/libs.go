package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// locker is one library's lock client in one process, shared by all the
// process's goroutines as a service would share it.
type locker interface {
	// lock takes name, waiting until ctx ends. A library call that gives
	// up on its own (redsync's tries, bsm's retry limit) is called again
	// and counted in giveUps: the caller still wants the lock.
	lock(ctx context.Context, name string) (unlock func(context.Context) error, err error)
	close() error
}

// lib is a contender: a library with one configuration.
type lib struct {
	key   string // stable id, also sent to the worker process
	label string // shown in the report's tables
	short string // shown in the charts
	// open returns the library's client for the server at addr; ttl is the
	// lease each lock gets.
	open func(addr string, ttl time.Duration) (locker, error)
}

// giveUps counts library calls that returned "not obtained" while the
// caller's context was still live.
var giveUps atomic.Int64

const (
	keyDlock       = "dlock"
	keyHand        = "hand"
	keyRedsync     = "redsync"
	keyRedsync1ms  = "redsync-1ms"
	keyBsm         = "bsm"
	keyBsm1ms      = "bsm-1ms"
	defaultLibsTTL = 10 * time.Second
)

// dlockLib runs dlock on b.
func dlockLib(b Backend) lib {
	key, label := keyDlock, "dlock"
	if b.Name() != "redis" {
		key += "-" + b.Name()
		label += " (" + b.Name() + ")"
	}
	return lib{key: key, label: label, short: label, open: func(addr string, ttl time.Duration) (locker, error) {
		l, closeFn, err := b.Open(addr)
		if err != nil {
			return nil, err
		}
		return &dlockLocker{l: l, closeFn: closeFn, ttl: ttl}, nil
	}}
}

var (
	handLib = lib{key: keyHand, label: "hand-written SET NX PX (1 ms poll)", short: "hand-written", open: func(addr string, ttl time.Duration) (locker, error) {
		return &handLocker{c: newClient(addr), ttl: ttl}, nil
	}}
	redsyncLib = lib{key: keyRedsync, label: "redsync (defaults: 32 tries, 50–250 ms delay)", short: "redsync (defaults)", open: func(addr string, ttl time.Duration) (locker, error) {
		return newRedsync(addr, redsync.WithExpiry(ttl)), nil
	}}
	redsync1msLib = lib{key: keyRedsync1ms, label: "redsync (tuned: 1 ms delay)", short: "redsync (1 ms)", open: func(addr string, ttl time.Duration) (locker, error) {
		return newRedsync(addr, redsync.WithExpiry(ttl), redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(math.MaxInt32)), nil
	}}
	bsmLib = lib{key: keyBsm, label: "bsm/redislock (README example: 100 ms linear, 3 retries)", short: "bsm (README 100 ms)", open: func(addr string, ttl time.Duration) (locker, error) {
		return newBsm(addr, ttl, func() bsm.RetryStrategy { return bsm.LimitRetry(bsm.LinearBackoff(100*time.Millisecond), 3) }), nil
	}}
	bsm1msLib = lib{key: keyBsm1ms, label: "bsm/redislock (tuned: 1 ms linear, context deadline)", short: "bsm (1 ms)", open: func(addr string, ttl time.Duration) (locker, error) {
		return newBsm(addr, ttl, func() bsm.RetryStrategy { return bsm.LinearBackoff(time.Millisecond) }), nil
	}}
)

// allLibs returns every contender by key, dlock on Redis included.
func allLibs() map[string]lib {
	m := make(map[string]lib)
	for _, l := range []lib{dlockLib(redisBackend{}), dlockLib(rueidisBackend{}), rueidislockLib, handLib, redsyncLib, redsync1msLib, bsmLib, bsm1msLib,
		dlockLib(redlockBackend{}), rlRedsyncLib, rlRedsync1msLib} {
		m[l.key] = l
	}
	for _, name := range storeNames {
		l := storeLib(name)
		m[l.key] = l
	}
	return m
}

// dlock: the Locker of the backend.
type dlockLocker struct {
	l       *dlock.Locker
	closeFn func() error
	ttl     time.Duration
}

func (d *dlockLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	k, err := d.l.Acquire(ctx, name, dlock.WithTTL(d.ttl))
	if err != nil {
		return nil, err
	}
	return k.Release, nil
}

func (d *dlockLocker) close() error { return d.closeFn() }

// handLocker is the baseline: SET NX PX with a random token, polled every
// millisecond while taken, and a Lua compare-and-delete to release.
type handLocker struct {
	c   *redis.Client
	ttl time.Duration
}

//go:embed lua/hand_release.lua
var handReleaseSrc string

var handRelease = redis.NewScript(handReleaseSrc)

func (h *handLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	token := randomToken()
	var t *time.Timer
	for {
		ok, err := h.c.SetNX(ctx, name, token, h.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func(ctx context.Context) error {
				return handRelease.Run(ctx, h.c, []string{name}, token).Err()
			}, nil
		}
		if t == nil {
			t = time.NewTimer(time.Millisecond)
			defer t.Stop()
		} else {
			t.Reset(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (h *handLocker) close() error { return h.c.Close() }

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// redsyncLocker: one Redsync over one goredis v9 pool per master; a Mutex
// per call.
type redsyncLocker struct {
	cs   []*redis.Client
	rs   *redsync.Redsync
	opts []redsync.Option
}

// newRedsync returns redsync over the masters at addrs, a comma-separated
// list (one address: the single-server case).
func newRedsync(addrs string, opts ...redsync.Option) *redsyncLocker {
	r := &redsyncLocker{opts: opts}
	var pools []redsyncredis.Pool
	for a := range strings.SplitSeq(addrs, ",") {
		c := newClient(a)
		r.cs = append(r.cs, c)
		pools = append(pools, goredis.NewPool(c))
	}
	r.rs = redsync.New(pools...)
	return r
}

func (r *redsyncLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	for {
		m := r.rs.NewMutex(name, r.opts...)
		err := m.LockContext(ctx)
		if err == nil {
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: unlock found the lock gone")
				}
				return err
			}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		giveUps.Add(1)
	}
}

func (r *redsyncLocker) close() error {
	var errs []error
	for _, c := range r.cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// bsmLocker: one bsm Client; retry strategies are stateful, so each call
// gets a new one.
type bsmLocker struct {
	c     *redis.Client
	l     *bsm.Client
	ttl   time.Duration
	retry func() bsm.RetryStrategy
}

func newBsm(addr string, ttl time.Duration, retry func() bsm.RetryStrategy) *bsmLocker {
	c := newClient(addr)
	return &bsmLocker{c: c, l: bsm.New(c), ttl: ttl, retry: retry}
}

func (b *bsmLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	for {
		k, err := b.l.Obtain(ctx, name, b.ttl, &bsm.Options{RetryStrategy: b.retry()})
		if err == nil {
			return k.Release, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, bsm.ErrNotObtained) {
			return nil, err
		}
		giveUps.Add(1)
	}
}

func (b *bsmLocker) close() error { return b.c.Close() }
