package rueidisredis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// conn is redisconn.Conn on a rueidis client.
type conn struct {
	c  rueidis.Client
	db int // the database the client selects, if known (Open), else -1
	// calls counts the calls in flight on c, so that Close can close c
	// again once they are done (see calls.exit).
	calls *calls
}

func newConn(c rueidis.Client, db int) conn { return conn{c: c, db: db, calls: &calls{c: c}} }

// calls counts a client's calls in flight. rueidis's Close does not stop
// a call that is dialing a connection: it marks the client's connection
// slot closed, and the dial, when it ends, stores its new connection over
// the mark, where nothing ever closes it (a socket leaked for the life of
// the process, found by the fault suite's leak check: redlock's Close
// closes its clients while a slow master's step is still running). So
// the last call to end after Close closes the client again, which closes
// what such a dial stored (closing is idempotent).
type calls struct {
	c      rueidis.Client
	mu     sync.Mutex
	n      int
	closed bool
}

func (k *calls) enter() {
	k.mu.Lock()
	k.n++
	k.mu.Unlock()
}

func (k *calls) exit() {
	k.mu.Lock()
	k.n--
	again := k.closed && k.n == 0
	k.mu.Unlock()
	if again {
		k.c.Close()
	}
}

func (k *calls) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.c.Close()
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
	c.calls.enter()
	defer c.calls.exit()
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
	c.calls.enter()
	defer c.calls.exit()
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
		cs = append(cs, conn{c: n, db: -1, calls: c.calls}) // the client's own: its Close closes them
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
	c.calls.close()
	return nil
}
