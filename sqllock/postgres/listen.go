package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

const (
	// listenTimeout bounds how long Watch waits for LISTEN to be active;
	// past it Watch returns anyway, and the listener wakes the watcher
	// once LISTEN is active again.
	listenTimeout = 2 * time.Second
	// maxReconnectDelay bounds the wait between attempts to reopen the
	// listening connection.
	maxReconnectDelay = 2 * time.Second
)

// listener holds one connection, with the settings of the pool's, that
// LISTENs on the table's channel, and wakes the watchers of the names that
// notifications carry. Its goroutine, started by the first watch, owns the
// connection and opens it again, with backoff, whenever it breaks; it
// exits when close cancels its context.
//
// A watch is never refused because the connection is down: a watcher
// registered meanwhile is woken when LISTEN is active again, as every
// watcher is after a reconnection, since a release while the connection
// was down notified nobody. So a waiter that began to wait during an
// outage is notified like the others once it ends, instead of polling.
type listener struct {
	db      *sql.DB
	channel string
	cfg     *pgx.ConnConfig // the pool's connection settings; used by the goroutine only

	mu       sync.Mutex
	closed   bool
	cancel   context.CancelFunc // stops the goroutine; nil until started
	done     chan struct{}      // closed when the goroutine has exited
	ready    chan struct{}      // closed while LISTEN is active; replaced when the connection breaks
	sessions int                // connections on which LISTEN succeeded
	stale    bool               // a watch returned while LISTEN was not active: wake all when it is
	watchers map[string]map[chan struct{}]struct{}
}

// newListener returns the listener of a Locker on db whose table names
// the channel; its goroutine starts with the first watch.
func newListener(db *sql.DB, channel string) dialects.Listener {
	return &listener{
		db:       db,
		channel:  channel,
		ready:    make(chan struct{}),
		watchers: make(map[string]map[chan struct{}]struct{}),
	}
}

// Watch returns a channel that receives when a notification names name,
// or when LISTEN becomes active again after the connection broke, and the
// function that ends the watch. It waits for LISTEN to be active, at
// most listenTimeout, within ctx.
func (l *listener) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w := make(chan struct{}, 1)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, errors.New("listener closed")
	}
	if l.cancel == nil {
		lctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.run(lctx) // exits when close calls l.cancel
	}
	m := l.watchers[name]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		l.watchers[name] = m
	}
	m[w] = struct{}{}
	ready := l.ready
	l.mu.Unlock()

	stop := func() { l.unwatch(name, w) }
	t := time.NewTimer(listenTimeout)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
		// The connection is down or slow to open: keep the watch, and
		// have the listener wake it once LISTEN is active.
		l.mu.Lock()
		select {
		case <-l.ready:
		default:
			l.stale = true
		}
		l.mu.Unlock()
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
	return w, stop, nil
}

func (l *listener) unwatch(name string, w chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.watchers[name], w)
	if len(l.watchers[name]) == 0 {
		delete(l.watchers, name)
	}
}

// run keeps a listening connection open until ctx ends, reconnecting with
// backoff when it breaks.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	delay := 50 * time.Millisecond
	for {
		if l.session(ctx) {
			delay = 50 * time.Millisecond
		}
		l.mu.Lock()
		select {
		case <-l.ready:
			l.ready = make(chan struct{})
		default:
		}
		l.mu.Unlock()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, maxReconnectDelay)
	}
}

// session opens a connection, LISTENs, and delivers notifications until
// the connection breaks or ctx ends. It reports whether LISTEN succeeded.
//
// The connection is the listener's own, opened with the configuration of
// the pool's connections (address, credentials, TLS) rather than taken
// from the pool: database/sql locks a connection for as long as Conn.Raw
// runs, and a Stmt.Close anywhere on the pool that needs that connection
// would block until the Locker closed.
func (l *listener) session(ctx context.Context) (listened bool) {
	if l.cfg == nil {
		cfg, err := l.config(ctx)
		if err != nil {
			return false
		}
		l.cfg = cfg
	}
	pc, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), dialects.CloseTimeout)
		defer cancel()
		pc.Close(cctx)
	}()
	if _, err := pc.Exec(ctx, `LISTEN "`+l.channel+`"`); err != nil {
		return false
	}
	l.listening()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.notify(n.Payload)
	}
}

// config returns the configuration of the pool's pgx connections.
func (l *listener) config(ctx context.Context) (*pgx.ConnConfig, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("not a pgx connection (%T)", dc)
		}
		cfg = sc.Conn().Config()
		// The copy still delivers notifications to the pool
		// connection's buffer; pgx installs its own when nil.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}

// listening marks LISTEN active. After a reconnection, or if a watch
// returned before LISTEN was active, it wakes every watcher, since
// notifications may have been lost meanwhile.
func (l *listener) listening() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.ready)
	l.sessions++
	if l.sessions > 1 || l.stale {
		for _, m := range l.watchers {
			dialects.Wake(m)
		}
	}
	l.stale = false
}

func (l *listener) notify(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dialects.Wake(l.watchers[name])
}

// Close stops the goroutine, waiting for it; later watches fail.
func (l *listener) Close() error {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
