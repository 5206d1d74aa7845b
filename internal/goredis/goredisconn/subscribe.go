package goredisconn

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
)

const (
	// healthInterval is how long a subscription's connection may stay
	// quiet before it is pinged (go-redis's Channel uses 3 s).
	healthInterval = 3 * time.Second
	// reconnectPause spaces attempts to read from a connection that keeps
	// failing.
	reconnectPause = 100 * time.Millisecond
)

// Subscribe implements redisconn.Conn. It reads the connection itself
// rather than through PubSub.Channel, whose relay goroutine would add a
// scheduler hop to every message; like Channel, it pings when the
// connection has been quiet for healthInterval, so that a broken
// connection is found and reconnected (and resubscribed).
func (c Conn) Subscribe(ctx context.Context, channel string, fn func(payload string, ok bool)) error {
	ps := c.C.Subscribe(ctx, channel)
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	defer ps.Close()
	failures := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			if rediserr.Classify(err) == driver.ErrorDenied {
				return err
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = ps.Ping(ctx) // a write error reconnects on the next read
				continue
			}
			// Reconnecting; do not spin while the server is down.
			failures++
			if failures > 1 {
				time.Sleep(reconnectPause)
			}
			continue
		}
		failures = 0
		switch m := msg.(type) {
		case *redis.Message:
			fn(m.Payload, true)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				fn("", false)
			}
		}
	}
}
