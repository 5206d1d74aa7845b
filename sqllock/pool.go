package sqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/pause"
)

const (
	// DefaultMaxConns is Options.MaxConns's default: the connections of
	// the pool that Open makes. With PostgreSQL's LISTEN connection a
	// Locker of Open holds at most DefaultMaxConns+1 connections on
	// PostgreSQL and DefaultMaxConns on MySQL (whose wake-ups use the
	// pool's), so ten processes fit in PostgreSQL's default
	// max_connections (100, 3 of them reserved for superusers) and
	// eighteen in MariaDB's (151).
	DefaultMaxConns = 8

	// DefaultSQLiteConns is the pool's default on SQLite: one connection
	// for acquisitions, one kept for renewals and releases. SQLite has
	// one writer at a time, and a writer it turns away sleeps in its busy
	// handler (steps of up to 100 ms), so more connections only move the
	// queue from the pool, which is first come first served, into that
	// handler: with 8 per Locker, 4 processes of 32 goroutines starting on
	// a new file saw a third of their acquisitions time out after 2 s.
	DefaultSQLiteConns = 2

	// connMaxIdleTime closes a connection of a pool made by Open that
	// stayed idle this long, so that a Locker idle after a burst gives
	// the server its connections back.
	connMaxIdleTime = 5 * time.Minute

	// connMaxLifetime replaces a connection of a pool made by Open after
	// this long, so that a server's per-session memory does not grow
	// for ever and connections move to a failed-over server.
	connMaxLifetime = 30 * time.Minute

	// minDialBackoff and maxDialBackoff bound the pause between dials of
	// a pool made by Open after a failed one (see backoffConnector).
	minDialBackoff = 50 * time.Millisecond
	maxDialBackoff = 2 * time.Second
)

// maxConns returns the pool size n asks for (0 means DefaultMaxConns), or
// an error wrapping dlock.ErrInvalid if n is negative.
func maxConns(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("sqllock: max conns %d is negative: %w", n, dlock.ErrInvalid)
	case n == 0:
		return DefaultMaxConns, nil
	}
	return n, nil
}

// sizePool bounds db, a pool made by Open, to n connections, keeps as
// many idle so that they are reused rather than opened again for each
// step, and lets idle and old connections go.
func sizePool(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(connMaxIdleTime)
	db.SetConnMaxLifetime(connMaxLifetime)
}

// reservedConns is how many of a bounded pool's connections a Locker
// keeps from its acquisitions, for renewals and releases, when the pool
// has n: two, or one of a pool of two, none of a pool of one.
func reservedConns(n int) int {
	return min(2, n-1)
}

// acquireSlots returns the semaphore that bounds a Locker's acquisition
// steps on db, so that renewals and releases never queue behind them for
// a connection: the pool's size, less reservedConns and the connections
// MySQL's wake-ups may borrow (lentConns). It returns nil for a pool
// without a bound, where nothing needs to be kept.
func acquireSlots(db *sql.DB, dialect Dialect) chan struct{} {
	n := db.Stats().MaxOpenConnections
	if n <= 0 {
		return nil
	}
	slots := n - reservedConns(n)
	if dialect == MySQL {
		slots -= lentConns(n)
	}
	return make(chan struct{}, max(slots, 1))
}

// enter takes one of sem's slots, waiting within ctx; a nil sem has no
// bound. It returns the function that gives the slot back.
func enter(ctx context.Context, sem chan struct{}) (func(), error) {
	if sem == nil {
		return func() {}, nil
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// backoffConnector dials for a pool made by Open. After a failed dial it
// lets one dial at a time through, each after a pause that starts at
// minDialBackoff and doubles to maxDialBackoff, with jitter, until a dial
// succeeds: so a server that is down or refuses connections sees one
// attempt per pause from each Locker, not one per waiting goroutine, and
// Lockers restarted together do not dial in step. A dial waits for its
// turn within its ctx.
type backoffConnector struct {
	sqldriver.Connector

	turn chan struct{} // held by the one dial let through while failing

	mu    sync.Mutex
	delay time.Duration // the last pause; 0 while dials succeed
	next  time.Time     // earliest time of the next dial while failing
}

func newBackoffConnector(c sqldriver.Connector) *backoffConnector {
	return &backoffConnector{Connector: c, turn: make(chan struct{}, 1)}
}

// Connect dials, waiting first for its turn and the pause if the last
// dial failed.
func (c *backoffConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	c.mu.Lock()
	failing := c.delay > 0
	c.mu.Unlock()
	if failing {
		select {
		case c.turn <- struct{}{}:
			defer func() { <-c.turn }()
		case <-ctx.Done():
			return nil, fmt.Errorf("sqllock: dial after a failed one: %w", ctx.Err())
		}
		c.mu.Lock()
		wait := time.Until(c.next)
		c.mu.Unlock()
		if wait > 0 && !pause.For(ctx, wait) {
			return nil, fmt.Errorf("sqllock: dial after a failed one: %w", ctx.Err())
		}
	}
	conn, err := c.Connector.Connect(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.delay, c.next = 0, time.Time{}
	case ctx.Err() == nil:
		c.delay = min(max(2*c.delay, minDialBackoff), maxDialBackoff)
		c.next = time.Now().Add(c.delay/2 + rand.N(c.delay/2+1))
	}
	return conn, err
}
