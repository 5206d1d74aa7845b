package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// giveBackJitter bounds the random delay before a waiter hears of a failed
// attempt's give-back (message "c"), so that contenders that split the
// votes do not all try again at the same instant.
const giveBackJitter = 20 * time.Millisecond

// quiet marks ctx so that go-redis logs nothing about the connections of
// clients Open made (see internal/redisquiet).
func (d *rlDriver) quiet(ctx context.Context) context.Context {
	if d.own {
		return redisquiet.Context(ctx)
	}
	return ctx
}

// Watch subscribes to name's channel on every master it can reach and
// returns once the subscriptions are confirmed. Each subscription is read
// by a goroutine of its own that stop ends (stop cancels the
// subscriptions and waits for the goroutines). It fails only if no master
// could be subscribed to.
func (d *rlDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wake := make(chan struct{}, 1)
	ch := d.channel(name)
	subs := each(ctx, d, d.timeoutFor(driver.MaxTTL), nil, func(ctx context.Context, _ int, c redisconn.Conn) *subscription {
		return subscribe(ctx, d.quiet(context.Background()), c, ch, wake)
	}, func(_ int, s *subscription) {
		s.stop() // confirmed too late to be used
	}, nil)
	stop := func() {
		// Cancel every subscription, then wait: a client that ends one
		// with a request (rueidis's UNSUBSCRIBE) waits at most once for a
		// master that does not answer.
		for _, s := range subs {
			s.cancel()
		}
		for _, s := range subs {
			s.wait()
		}
	}
	for _, s := range subs {
		if s != nil {
			return wake, stop, nil
		}
	}
	stop()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redlock: watch %q: %w", name, err)
	}
	return nil, nil, fmt.Errorf("redlock: watch %q: no master could be subscribed to", name)
}

// subscription is one master's subscription of a Watch.
type subscription struct {
	end  context.CancelFunc // ends it
	done chan struct{}      // closed when its goroutine has returned
}

// stop ends s, if not nil, and waits for its goroutine.
func (s *subscription) stop() {
	s.cancel()
	s.wait()
}

// cancel ends s, if not nil.
func (s *subscription) cancel() {
	if s != nil {
		s.end()
	}
}

// wait waits for s's goroutine, if s is not nil.
func (s *subscription) wait() {
	if s != nil {
		<-s.done
	}
}

// subscribe subscribes to channel on c, with base's values, and returns
// the subscription once the server confirms it, or nil if ctx ends or the
// server refuses it first. Its goroutine, which stop ends, wakes the
// waiter on every message (after a random delay up to giveBackJitter for
// a failed attempt's give-back, "c") and after every resubscription that
// follows a broken connection, since a release may have been missed.
func subscribe(ctx, base context.Context, c redisconn.Conn, channel string, wake chan<- struct{}) *subscription {
	sctx, cancel := context.WithCancel(base)
	s := &subscription{end: cancel, done: make(chan struct{})}
	confirmed := make(chan struct{})
	first := true
	go func() { // ends when Subscribe returns: stop, or a refusal
		defer close(s.done)
		_ = c.Subscribe(sctx, channel, func(payload string, ok bool) {
			switch {
			case !ok && first:
				first = false
				close(confirmed)
			case payload == "c":
				time.AfterFunc(rand.N(giveBackJitter), func() { signal(wake) })
			default:
				signal(wake)
			}
		})
	}()
	select {
	case <-confirmed:
		return s
	case <-ctx.Done():
	case <-s.done:
	}
	s.stop()
	return nil
}

func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
