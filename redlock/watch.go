package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
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
// returns once the subscriptions are confirmed. Each subscription is a
// connection of its own, read by a goroutine that stop ends (stop closes
// the connections and waits for the goroutines). It fails only if no
// master could be subscribed to.
func (d *rlDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wake := make(chan struct{}, 1)
	ch := d.channel(name)
	subs := each(ctx, d, d.timeoutFor(driver.MaxTTL), nil, func(ctx context.Context, _ int, c redis.UniversalClient) *redis.PubSub {
		ctx = d.quiet(ctx)
		ps := c.Subscribe(ctx)
		if err := ps.Subscribe(ctx, ch); err != nil {
			ps.Close()
			return nil
		}
		deadline, _ := ctx.Deadline()
		if msg, err := ps.ReceiveTimeout(ctx, time.Until(deadline)); err != nil {
			ps.Close()
			return nil
		} else if _, ok := msg.(*redis.Subscription); !ok {
			ps.Close()
			return nil
		}
		return ps
	}, func(_ int, ps *redis.PubSub) {
		if ps != nil {
			ps.Close() // confirmed too late to be used
		}
	}, nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, ps := range subs {
		if ps != nil {
			wg.Go(func() { listen(d.quiet(context.Background()), ps, wake, done) })
		}
	}
	stop := func() {
		close(done)
		for _, ps := range subs {
			if ps != nil {
				ps.Close()
			}
		}
		wg.Wait()
	}
	for _, ps := range subs {
		if ps != nil {
			return wake, stop, nil
		}
	}
	stop()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redlock: watch %q: %w", name, err)
	}
	return nil, nil, fmt.Errorf("redlock: watch %q: no master could be subscribed to", name)
}

// listen forwards the messages of one subscription to wake until done is
// closed. After a broken connection (go-redis reconnects and subscribes
// again on the next read) it wakes the waiter, since a release may have
// been missed, and waits a little before reading again.
func listen(ctx context.Context, ps *redis.PubSub, wake chan<- struct{}, done <-chan struct{}) {
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-done:
			return false
		}
	}
	backoff := 50 * time.Millisecond
	for {
		msg, err := ps.Receive(ctx)
		select {
		case <-done:
			return
		default:
		}
		if err != nil {
			signal(wake)
			if !pause(backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		if m.Payload == "c" && !pause(rand.N(giveBackJitter)) {
			return
		}
		signal(wake)
	}
}

func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
