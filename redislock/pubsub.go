package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
	"github.com/dlock-go/dlock/internal/redisconn"
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
	c       redisconn.Conn
	channel string          // prefix + "w:"; the Locker id is appended on first use
	ctx     context.Context // for the connection's calls (see quiet)

	mu      sync.Mutex
	cancel  context.CancelFunc // ends the subscription; nil before the first wait
	ready   chan struct{}      // closed when the server confirms the subscription
	closed  bool
	waiters map[string]chan string // by owner; buffered, one pending wake-up
	denial  error                  // the server refused the subscription (Classify: denied)
	loop    sync.WaitGroup
}

// newGrants returns the grants of a Locker on c; quiet marks the
// connection's calls so that go-redis does not log about them (for a
// client that dlock.Open made).
func newGrants(c redisconn.Conn, channelPrefix string, quiet bool) *grants {
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
		return nil, nil, nil, redisconn.ErrClosed
	}
	if g.denial != nil {
		return nil, nil, nil, g.denial
	}
	if g.cancel == nil {
		g.channel += lockerID
		g.ready = make(chan struct{})
		var ctx context.Context
		ctx, g.cancel = context.WithCancel(g.ctx)
		g.loop.Add(1)
		go g.receive(ctx, g.ready)
	}
	g.waiters[owner] = ch
	stop = func() {
		g.mu.Lock()
		delete(g.waiters, owner)
		g.mu.Unlock()
	}
	return ch, g.ready, stop, nil
}

// receive delivers grants until ctx ends (close) or the server refuses
// the subscription. The client reconnects and resubscribes by itself.
func (g *grants) receive(ctx context.Context, ready chan struct{}) {
	defer g.loop.Done()
	confirmed := false
	err := g.c.Subscribe(ctx, g.channel, func(payload string, ok bool) {
		if ok {
			if owner, _, ok := strings.Cut(payload, "|"); ok {
				g.wake(owner, payload)
			}
			return
		}
		if !confirmed {
			confirmed = true
			close(ready)
			return
		}
		// Subscribed again after a reconnect: grants may have been
		// lost meanwhile, so every waiter asks the server again.
		g.mu.Lock()
		for o := range g.waiters {
			g.wakeLocked(o, "")
		}
		g.mu.Unlock()
	})
	if err == nil || ctx.Err() != nil {
		return
	}
	// Not granted SUBSCRIBE on the channel (a client New was given; Open
	// checks it): waiters would never be woken, so they fail instead, and
	// so does every later wait of this Locker.
	g.mu.Lock()
	g.denial = fmt.Errorf("subscribe to %s: %w", g.channel, err)
	for o := range g.waiters {
		g.wakeLocked(o, "")
	}
	g.mu.Unlock()
}

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
	cancel := g.cancel
	g.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	g.loop.Wait()
	return nil
}

// failure returns the server's refusal of the subscription, if any.
func (g *grants) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.denial
}
