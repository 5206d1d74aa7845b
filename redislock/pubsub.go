package redislock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// grants receives, on one pub/sub connection per Locker (opened on its
// first Acquire and kept until Close), the messages by which a releasing
// script hands the lock to a waiter of this Locker: "owner|fence" on the
// channel prefix + "w:" + the Locker id. Its goroutine exits when close
// closes the connection.
type grants struct {
	c       redis.UniversalClient
	channel string // prefix + "w:"; the Locker id is appended on first use

	mu      sync.Mutex
	ps      *redis.PubSub
	ready   chan struct{} // closed when the server confirms the subscription
	closed  bool
	waiters map[string]chan grant // by owner
	loop    sync.WaitGroup
}

// grant is what a waiter is told: the lock is its own (with this fence),
// or, with retry set, that messages may have been lost and it should ask
// the server again.
type grant struct {
	fence uint64
	retry bool
}

func newGrants(c redis.UniversalClient, channelPrefix string) *grants {
	return &grants{c: c, channel: channelPrefix, waiters: make(map[string]chan grant)}
}

// wait registers owner (of the Locker lockerID) for grants, subscribing
// the Locker's channel on first use without waiting for the server's
// confirmation. ready is closed once the subscription is active; stop
// unregisters owner.
func (g *grants) wait(ctx context.Context, lockerID, owner string) (granted <-chan grant, ready <-chan struct{}, stop func(), err error) {
	ch := make(chan grant, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, nil, redis.ErrClosed
	}
	if g.ps == nil {
		g.channel += lockerID
		g.ready = make(chan struct{})
		g.ps = g.c.Subscribe(context.WithoutCancel(ctx), g.channel)
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
	ctx := context.Background()
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
			owner, f, ok := strings.Cut(m.Payload, "|")
			fence, err := strconv.ParseUint(f, 10, 64)
			if ok && err == nil {
				g.send(owner, grant{fence: fence})
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
				g.sendLocked(o, grant{retry: true})
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

func (g *grants) send(owner string, gr grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sendLocked(owner, gr)
}

func (g *grants) sendLocked(owner string, gr grant) {
	ch := g.waiters[owner]
	if ch == nil {
		return
	}
	select {
	case ch <- gr:
	default:
		// A retry is pending; a grant must not be lost behind it.
		if !gr.retry {
			select {
			case <-ch:
			default:
			}
			ch <- gr
		}
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
