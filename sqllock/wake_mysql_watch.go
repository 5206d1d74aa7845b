package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// The waiter's side of MySQL wake-ups (see wake_mysql.go): each name the
// Locker waits on has one goroutine blocked in GET_LOCK on the name's
// named lock, on one borrowed connection, which wakes the Locker's
// waiters of that name when a holder releases it.

const (
	// watchTimeout is the GET_LOCK timeout of a waiter, in seconds: a
	// waiter whose statement outlives its connection (cancelled by
	// closing it) leaves the server's queue within it.
	watchTimeout = 5

	// wakePause is how long a waiter's watch waits, after a wake-up from
	// a holder's release, before it blocks again: long enough for the
	// waiter's retry, which usually succeeds and ends the watch, so that
	// the watch seldom has to close a connection blocked behind its own
	// Locker's named lock.
	wakePause = 5 * time.Millisecond

	// minWatchBackoff is the first pause of a watch that found the key
	// free (no holder takes part: a holder not yet holding the key, or
	// one of an older dlock); it doubles up to the Locker's retry bound.
	minWatchBackoff = 5 * time.Millisecond
)

var errNoWatchConn = errors.New("no connection left for wake-ups")

// watchSet is one name's watch: its waiters' channels and how to stop it.
type watchSet struct {
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	joined chan struct{} // buffered: a waiter joined, poll from the shortest backoff again
}

// watch subscribes to wake-ups for name, starting the name's watch if it
// has none. It fails if the pool has no connection to lend.
func (n *namedLocks) watch(name string) (<-chan struct{}, func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil, errors.New("closed")
	}
	ws := n.watches[name]
	if ws == nil {
		conn, ok := n.slot()
		if !ok {
			return nil, nil, errNoWatchConn
		}
		ctx, cancel := context.WithCancel(n.ctx)
		ws = &watchSet{subs: make(map[chan struct{}]struct{}), cancel: cancel, joined: make(chan struct{}, 1)}
		n.watches[name] = ws
		n.wg.Add(1)
		go n.run(ctx, name, ws, conn) // exits when the last waiter stops or at close
	}
	w := make(chan struct{}, 1)
	ws.subs[w] = struct{}{}
	select {
	case ws.joined <- struct{}{}:
	default:
	}
	stop := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(ws.subs, w)
		if len(ws.subs) == 0 && n.watches[name] == ws {
			delete(n.watches, name)
			ws.cancel()
		}
	}
	return w, stop, nil
}

// run is name's watch goroutine. It owns a slot (see slot) and conn, if
// not nil.
func (n *namedLocks) run(ctx context.Context, name string, ws *watchSet, conn *sql.Conn) {
	defer n.wg.Done()
	var backoff time.Duration
	defer func() { n.releaseConn(conn, false) }()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := n.db.Conn(ctx)
			if err != nil {
				n.wake(ws)
				backoff = n.nextBackoff(backoff)
				pause.For(ctx, backoff)
				continue
			}
			conn = c
		}
		held, got, err := n.block(ctx, conn, name)
		pauseFor := time.Duration(0)
		switch {
		case err != nil:
			// The connection failed or was closed by ctx: discard it.
			discard(conn)
			conn = nil
			n.wake(ws)
			backoff = n.nextBackoff(backoff)
			pauseFor = backoff
		case !got:
			// Timed out: the holder still holds it. Wait again.
			continue
		case held:
			// A holder released the key (or its session ended).
			n.wake(ws)
			backoff = 0
			pauseFor = wakePause
		default:
			// The key was free: the holder takes no part, or not yet
			// (see takeDelay). Poll, backing off as a polling waiter
			// does from the start of its wait: a waiter that joins
			// starts the backoff again.
			n.wake(ws)
			select {
			case <-ws.joined:
				backoff = 0
			default:
			}
			backoff = n.nextBackoff(backoff)
			pauseFor = backoff
		}
		t := time.NewTimer(pauseFor)
		select {
		case <-t.C:
		case <-ws.joined:
			backoff = 0
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// nextBackoff doubles prev within [minWatchBackoff, n.maxRetry].
func (n *namedLocks) nextBackoff(prev time.Duration) time.Duration {
	return max(min(2*prev, n.maxRetry), minWatchBackoff)
}

// block waits in the server's queue for name's named lock, takes it and
// releases it at once, in one statement. It reports whether another
// session held the key when the statement began, and whether the
// statement got it before watchTimeout.
func (n *namedLocks) block(ctx context.Context, conn *sql.Conn, name string) (held, got bool, err error) {
	key, err := n.key(conn, name)
	if err != nil {
		return false, false, err
	}
	var user, res sql.NullInt64
	err = conn.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?), IF(GET_LOCK(?, ?) = 1, RELEASE_LOCK(?), 0)`,
		key, key, watchTimeout, key).Scan(&user, &res)
	if err != nil {
		return false, false, err
	}
	if !res.Valid {
		return false, false, errors.New("get_lock failed")
	}
	return user.Valid, res.Int64 == 1, nil
}

// wake sends a wake-up to each of ws's waiters, without blocking.
func (n *namedLocks) wake(ws *watchSet) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dialects.Wake(ws.subs)
}
