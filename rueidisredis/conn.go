package rueidisredis

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// conn is redisconn.Conn on a rueidis client.
type conn struct {
	c  rueidis.Client
	db int // the database the client selects, if known (Open), else -1
}

var (
	_ redisconn.Conn      = conn{}
	_ redisconn.Clustered = conn{}
)

func (c conn) build(cmd redisconn.Cmd) rueidis.Completed {
	b := c.c.B().Arbitrary(cmd.Name...)
	if len(cmd.Keys) > 0 {
		return b.Keys(cmd.Keys...).Args(cmd.Args...).Build()
	}
	return b.Args(cmd.Args...).Build()
}

// Pipeline implements redisconn.Conn: one command with Do, several with
// DoMulti, which sends them on one connection of a single node's client
// (and splits them by slot on a Cluster).
func (c conn) Pipeline(ctx context.Context, cmds []redisconn.Cmd) []redisconn.Reply {
	out := make([]redisconn.Reply, len(cmds))
	if len(cmds) == 1 {
		out[0] = reply(c.c.Do(ctx, c.build(cmds[0])))
		return out
	}
	built := make(rueidis.Commands, len(cmds))
	for i, cmd := range cmds {
		built[i] = c.build(cmd)
	}
	for i, r := range c.c.DoMulti(ctx, built...) {
		out[i] = reply(r)
	}
	return out
}

// reply converts a result: a null to redisconn.ErrNil, RESP3 booleans to
// the integers RESP2 gives (the drivers' scripts return no booleans, but
// a caller's false reads as Redis's null).
func reply(r rueidis.RedisResult) redisconn.Reply {
	v, err := r.ToAny()
	switch {
	case rueidis.IsRedisNil(err):
		return redisconn.Reply{Err: redisconn.ErrNil}
	case err != nil:
		return redisconn.Reply{Err: err}
	}
	return redisconn.Reply{Val: normalize(v)}
}

// normalize turns RESP3's booleans into RESP2's replies (1 for true,
// null for false) and leaves the rest.
func normalize(v any) any {
	switch v := v.(type) {
	case bool:
		if v {
			return int64(1)
		}
		return nil
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
	}
	return v
}

// Subscribe implements redisconn.Conn with Receive, again after each
// connection that broke, its confirmations reported through
// rueidis.WithOnSubscriptionHook. Receive leaves the server subscribed
// when ctx ends (it shares the connection with the client's commands):
// the channel is unsubscribed on that connection then, so that a
// long-lived client does not gather a subscription for every name ever
// waited on. Another Subscribe to the same channel on the same client
// subscribes again by itself, and reports it (fn with ok false).
func (c conn) Subscribe(ctx context.Context, channel string, fn func(payload string, ok bool)) error {
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" {
			fn("", false)
		}
	})
	hooked = rueidis.WithOnReceiveReturnHook(hooked, func(err error, cc rueidis.CommandClient) error {
		if ctx.Err() != nil {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubscribeTimeout)
			defer cancel()
			_ = cc.Do(uctx, cc.B().Unsubscribe().Channel(channel).Build()).Error() // a broken connection drops it anyway
		}
		return err
	})
	failures := 0
	for ctx.Err() == nil {
		err := c.c.Receive(hooked, c.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			fn(m.Message, true)
		})
		switch {
		case ctx.Err() != nil, errors.Is(err, rueidis.ErrClosing):
			return nil
		case c.Classify(err) == driver.ErrorDenied:
			return err
		}
		// The connection broke: subscribe again, without spinning while
		// the server is down.
		failures++
		if failures > 1 {
			t := time.NewTimer(reconnectPause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return nil
}

const (
	// reconnectPause spaces attempts to subscribe on a connection that
	// keeps failing.
	reconnectPause = 100 * time.Millisecond
	// unsubscribeTimeout bounds the UNSUBSCRIBE at a subscription's end
	// (a round trip on a healthy connection; a sick one drops the
	// subscription anyway when it breaks).
	unsubscribeTimeout = 500 * time.Millisecond
)

// Masters implements redisconn.Conn: on a Cluster, a client on each node
// the client knows (replicas too: the callers' reads are of key names,
// which they deduplicate).
func (c conn) Masters(context.Context) ([]redisconn.Conn, error) {
	if !c.Cluster() {
		return []redisconn.Conn{c}, nil
	}
	var cs []redisconn.Conn
	for _, n := range c.c.Nodes() {
		cs = append(cs, conn{c: n, db: -1})
	}
	return cs, nil
}

// Cluster implements redisconn.Clustered.
func (c conn) Cluster() bool { return c.c.Mode() == rueidis.ClientModeCluster }

// DB implements redisconn.Conn: the database Open selected, or -1 (no
// one database) on a Cluster or when unknown. rueidis does not say which
// database a client selects (ClientOption.SelectDB), so the resume tokens
// of a Locker made by NewLocker name its key prefix alone (see the
// package documentation).
func (c conn) DB() int {
	if c.Cluster() {
		return -1
	}
	return c.db
}

// Classify implements redisconn.Conn.
func (conn) Classify(err error) driver.ErrorKind {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return redisconn.ClassifyServer(strings.TrimSpace(re.Error()))
	}
	return redisconn.ClassifyTransport(err)
}

// Close implements redisconn.Conn.
func (c conn) Close() error {
	c.c.Close()
	return nil
}
