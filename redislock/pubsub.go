package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber multiplexes the release channels of every name a Locker's
// waiters wait on over one pub/sub connection, opened on the first wait.
// Its goroutine (started with the connection) exits when close closes the
// connection.
type subscriber struct {
	c redis.UniversalClient

	mu       sync.Mutex // also serializes SUBSCRIBE/UNSUBSCRIBE writes
	ps       *redis.PubSub
	closed   bool
	watchers map[string]map[chan struct{}]struct{} // by channel
	// pending counts SUBSCRIBE commands per channel whose confirmation
	// has not arrived; ready channels close when it reaches zero.
	pending map[string]int
	ready   map[string][]chan struct{}
	loop    sync.WaitGroup
}

// confirmTimeout bounds how long watch waits for the server to confirm a
// subscription; past it the waiter relies on its fallback timer.
const confirmTimeout = time.Second

// writeTimeout bounds one SUBSCRIBE or UNSUBSCRIBE write.
const writeTimeout = time.Second

func newSubscriber(c redis.UniversalClient) *subscriber {
	return &subscriber{
		c:        c,
		watchers: make(map[string]map[chan struct{}]struct{}),
		pending:  make(map[string]int),
		ready:    make(map[string][]chan struct{}),
	}
}

func (s *subscriber) watch(ctx context.Context, ch string) (<-chan struct{}, func(), error) {
	w := make(chan struct{}, 1)
	ready := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, redis.ErrClosed
	}
	if s.ps == nil {
		s.ps = s.c.Subscribe(context.Background())
		msgs := s.ps.ChannelWithSubscriptions()
		s.loop.Add(1)
		go s.receive(msgs)
	}
	m := s.watchers[ch]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		s.watchers[ch] = m
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := s.ps.Subscribe(wctx, ch)
		cancel()
		if err != nil {
			delete(s.watchers, ch)
			s.mu.Unlock()
			return nil, nil, err
		}
		s.pending[ch]++
	}
	m[w] = struct{}{}
	if s.pending[ch] > 0 {
		s.ready[ch] = append(s.ready[ch], ready)
	} else {
		close(ready)
	}
	s.mu.Unlock()

	stop := func() { s.unwatch(ch, w) }
	t := time.NewTimer(confirmTimeout)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
	return w, stop, nil
}

func (s *subscriber) unwatch(ch string, w chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.watchers[ch]
	delete(m, w)
	if len(m) > 0 || m == nil {
		return
	}
	delete(s.watchers, ch)
	if !s.closed {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		s.ps.Unsubscribe(ctx, ch) // on failure the server keeps sending; receive drops it
		cancel()
	}
}

// receive delivers messages to watchers until the connection is closed.
func (s *subscriber) receive(msgs <-chan any) {
	defer s.loop.Done()
	for msg := range msgs {
		switch m := msg.(type) {
		case *redis.Message:
			s.notify(m.Channel)
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			s.mu.Lock()
			if s.pending[m.Channel] > 0 {
				s.pending[m.Channel]--
			} else {
				// A resubscription after a reconnect: messages may have
				// been lost meanwhile, so let waiters try again.
				s.notifyLocked(m.Channel)
			}
			if s.pending[m.Channel] == 0 {
				delete(s.pending, m.Channel)
				for _, r := range s.ready[m.Channel] {
					close(r)
				}
				delete(s.ready, m.Channel)
			}
			s.mu.Unlock()
		}
	}
}

func (s *subscriber) notify(ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyLocked(ch)
}

func (s *subscriber) notifyLocked(ch string) {
	for w := range s.watchers[ch] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	ps := s.ps
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	s.loop.Wait()
	return err
}
