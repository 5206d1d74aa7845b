package redislock

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/redisquiet"
	"github.com/redis/go-redis/v9"
)

// grants receives, on one pub/sub connection per Locker (opened on its
// first Acquire and kept until Close), the messages by which a releasing
// script hands the lock to a waiter of this Locker: "owner|fence" on the
// channel prefix + "w:" + the Locker id. It wakes that waiter, which then
// asks the server: a message is a hint, never proof, since it may arrive
// long after it was sent (the fence in it is not used). Its goroutine
// exits when close closes the connection.
type grants struct {
	c       redis.UniversalClient
	channel string          // prefix + "w:"; the Locker id is appended on first use
	ctx     context.Context // for the connection's calls (see quiet)

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirms the subscription
	closed  bool
	waiters map[string]chan struct{} // by owner; buffered, one pending wake-up
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
	return &grants{c: c, channel: channelPrefix, ctx: ctx, waiters: make(map[string]chan struct{})}
}

// wait registers owner (of the Locker lockerID) for wake-ups, subscribing
// the Locker's channel on first use without waiting for the server's
// confirmation. wake receives a value when a grant for owner may have
// been published (a grant message, or a resubscription after which
// messages may have been lost); ready is closed once the subscription is
// active; stop unregisters owner.
func (g *grants) wait(lockerID, owner string) (wake <-chan struct{}, ready <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{}, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, nil, redis.ErrClosed
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
				g.wake(owner)
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
				g.wakeLocked(o)
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

// wake wakes owner's waiter, if it waits in this Locker.
func (g *grants) wake(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wakeLocked(owner)
}

func (g *grants) wakeLocked(owner string) {
	select {
	case g.waiters[owner] <- struct{}{}:
	default: // not waiting here, or a wake-up is pending already
	}
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
