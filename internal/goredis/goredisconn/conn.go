// Package goredisconn is redisconn.Conn on a go-redis v9 client, for
// redislock and redlock: the client every go-redis user already has, so
// their graph gains nothing.
package goredisconn

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// Conn is redisconn.Conn on a go-redis client.
type Conn struct {
	C redis.UniversalClient
}

var (
	_ redisconn.Conn      = Conn{}
	_ redisconn.KeyRouter = Conn{}
	_ redisconn.Clustered = Conn{}
)

// New returns c as a redisconn.Conn.
func New(c redis.UniversalClient) Conn { return Conn{C: c} }

func args(c redisconn.Cmd) []any {
	a := make([]any, 0, len(c.Name)+len(c.Keys)+len(c.Args))
	for _, s := range c.Name {
		a = append(a, s)
	}
	for _, s := range c.Keys {
		a = append(a, s)
	}
	for _, s := range c.Args {
		a = append(a, s)
	}
	return a
}

func reply(cmd *redis.Cmd) redisconn.Reply {
	v, err := cmd.Result()
	if err == redis.Nil {
		err = redisconn.ErrNil
	}
	return redisconn.Reply{Val: v, Err: err}
}

// Pipeline implements redisconn.Conn: one command with Do, several in a
// go-redis pipeline (which a ClusterClient splits by slot).
func (c Conn) Pipeline(ctx context.Context, cmds []redisconn.Cmd) []redisconn.Reply {
	out := make([]redisconn.Reply, len(cmds))
	if len(cmds) == 1 {
		out[0] = reply(c.C.Do(ctx, args(cmds[0])...))
		return out
	}
	p := c.C.Pipeline()
	rs := make([]*redis.Cmd, len(cmds))
	for i, cmd := range cmds {
		rs[i] = p.Do(ctx, args(cmd)...)
	}
	p.Exec(ctx) // each command carries its own outcome
	for i, r := range rs {
		out[i] = reply(r)
	}
	return out
}

// Masters implements redisconn.Conn.
func (c Conn) Masters(ctx context.Context) ([]redisconn.Conn, error) {
	cc, ok := c.C.(*redis.ClusterClient)
	if !ok {
		return []redisconn.Conn{c}, nil
	}
	var (
		mu sync.Mutex
		ms []redisconn.Conn
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		ms = append(ms, Conn{C: n})
		mu.Unlock()
		return nil
	})
	return ms, err
}

// MasterFor implements redisconn.KeyRouter.
func (c Conn) MasterFor(ctx context.Context, key string) (redisconn.Conn, error) {
	cc, ok := c.C.(*redis.ClusterClient)
	if !ok {
		return c, nil
	}
	n, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return Conn{C: n}, nil
}

// Reload implements redisconn.KeyRouter.
func (c Conn) Reload(ctx context.Context) {
	if cc, ok := c.C.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// Cluster implements redisconn.Clustered.
func (c Conn) Cluster() bool {
	_, ok := c.C.(*redis.ClusterClient)
	return ok
}

// DB implements redisconn.Conn.
func (c Conn) DB() int {
	if cl, ok := c.C.(*redis.Client); ok {
		return cl.Options().DB
	}
	return -1 // a Cluster or a Ring
}

// Classify implements redisconn.Conn with rediserr.Classify.
func (Conn) Classify(err error) driver.ErrorKind { return rediserr.Classify(err) }

// Close implements redisconn.Conn.
func (c Conn) Close() error { return c.C.Close() }

// IsClosed reports whether err says the client was closed.
func IsClosed(err error) bool { return errors.Is(err, redis.ErrClosed) }
