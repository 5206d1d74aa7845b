package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
)

// grants receives, on one pub/sub connection per Locker (opened on its
// first Acquire and kept until Close), the messages by which a releasing
// script hands the lock to a waiter of this Locker: "owner|fence|ticket"
// on the channel prefix + "w:" + the Locker id. It passes the message to
// that waiter, which takes it as the grant only if the ticket is one of
// its own calls' (see AcquireQueued) and otherwise asks the server: a
// message may arrive long after it was sent. Its goroutine exits when
// close closes the connection.
type grants struct {
	c       redis.UniversalClient
	channel string          // prefix + "w:"; the Locker id is appended on first use
	ctx     context.Context // for the connection's calls (see quiet)

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirms the subscription
	closed  bool
	waiters map[string]chan string // by owner; buffered, one pending wake-up
	denial  error                  // the server refused the subscription (rediserr.Classify: denied)
	loop    sync.WaitGroup
}

// newGrants returns the grants of a Locker on c; quiet marks the
// connection's calls so that go-redis does not log about them (for a
// client that dlock.Open made).
func newGrants(c redis.UniversalClient, channelPrefix string, quiet bool) *grants {
	ctx := context.Background()
	if quiet {
		ctx = redisquiet.Context(ctx)
	}
	return &grants{c: c, channel: channelPrefix, ctx: ctx, waiters: make(map[string]chan string)}
}

// wait registers owner (of the Locker lockerID) for wake-ups, subscribing
// the Locker's channel on first use without waiting for the server's
// confirmation. wake receives a value when a grant for owner may have
// been published: the grant message, or "" (a resubscription after which
// messages may have been lost); ready is closed once the subscription is
// active; stop unregisters owner.
func (g *grants) wait(lockerID, owner string) (wake <-chan string, ready <-chan struct{}, stop func(), err error) {
	ch := make(chan string, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, nil, redis.ErrClosed
	}
	if g.denial != nil {
		return nil, nil, nil, g.denial
	}
	if g.ps == nil {
		g.channel += lockerID
		g.ready = make(chan struct{})
		g.ps = g.c.Subscribe(g.ctx, g.channel)
		g.loop.Add(1)
		go g.receive(g.ps, g.ready)
	}
	g.waiters[owner] = ch
	stop = func() {
		g.mu.Lock()
		delete(g.waiters, owner)
		g.mu.Unlock()
	}
	return ch, g.ready, stop, nil
}

// receive delivers grants until the connection is closed. It reads the
// connection itself rather than through PubSub.Channel, whose relay
// goroutine would add a scheduler hop to every handoff; like Channel, it
// pings when the connection has been quiet for healthInterval, so that a
// broken connection is found and reconnected (and resubscribed).
func (g *grants) receive(ps *redis.PubSub, ready chan struct{}) {
	defer g.loop.Done()
	ctx := g.ctx
	confirmed := false
	failures := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			if rediserr.Classify(err) == driver.ErrorDenied {
				// Not granted SUBSCRIBE on the channel (a client New
				// was given; Open checks it): waiters would never be
				// woken, so they fail instead, and so does every later
				// wait of this Locker.
				g.mu.Lock()
				g.denial = fmt.Errorf("subscribe to %s: %w", g.channel, err)
				for o := range g.waiters {
					g.wakeLocked(o, "")
				}
				g.mu.Unlock()
				return
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
			if owner, _, ok := strings.Cut(m.Payload, "|"); ok {
				g.wake(owner, m.Payload)
			}
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if !confirmed {
				confirmed = true
				close(ready)
				continue
			}
			// Subscribed again after a reconnect: grants may have been
			// lost meanwhile, so every waiter asks the server again.
			g.mu.Lock()
			for o := range g.waiters {
				g.wakeLocked(o, "")
			}
			g.mu.Unlock()
		}
	}
}

const (
	// healthInterval is how long the grants connection may stay quiet
	// before it is pinged (go-redis's Channel uses 3 s).
	healthInterval = 3 * time.Second
	// reconnectPause spaces attempts to read from a connection that keeps
	// failing.
	reconnectPause = 100 * time.Millisecond
)

// wake passes msg (a grant message, or "") to owner's waiter, if it
// waits in this Locker. A pending grant message is replaced by a newer
// one, never by "".
func (g *grants) wake(owner, msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wakeLocked(owner, msg)
}

func (g *grants) wakeLocked(owner, msg string) {
	ch := g.waiters[owner]
	if ch == nil {
		return // not waiting here
	}
	select {
	case old := <-ch:
		if msg == "" {
			msg = old
		}
	default:
	}
	ch <- msg // the only sender (under g.mu), into an emptied buffer
}

func (g *grants) close() error {
	g.mu.Lock()
	g.closed = true
	ps := g.ps
	g.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	g.loop.Wait()
	return err
}

// failure returns the server's refusal of the subscription, if any.
func (g *grants) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.denial
}
