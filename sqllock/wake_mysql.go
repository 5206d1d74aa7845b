package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"sync"
	"time"

	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// MySQL wake-ups: MySQL has no notifications, but it has a queue. A
// session blocked in GET_LOCK(key, timeout) returns as soon as the session
// holding key releases it or ends. So while a Locker holds a name
// exclusively it also holds a named lock derived from the name, on one
// connection of its own, and a waiter blocks in GET_LOCK on that key as
// its wake-up. A wake-up is a hint, never proof: the table stays the only
// source of truth. The named lock is taken after the row and released
// after the row is freed, so a waiter whose GET_LOCK returns may find the
// row free, and a lost or spurious wake-up costs latency, never safety
// (the core still polls no slower than MaxRetryInterval).
//
// GET_LOCK is level-triggered: a waiter whose GET_LOCK reaches the server
// after the holder released the key gets it at once. So a Watch is active
// as soon as it returns, whether or not its statement has been sent.
//
// The mechanism is namedLocks, one per Locker, which mysqlDriver (in
// mysql.go) calls: this file holds its state and its connections,
// wake_mysql_hold.go the holder's side (the named locks of the names held
// here), wake_mysql_watch.go the waiter's side (one GET_LOCK wait per name
// waited on), and wake_mysql_lent.go the per-pool budget of connections
// that both sides borrow from the caller's pool.

const (
	// namedLockPrefix starts every named lock dlock takes, so that it
	// shares no name with other applications' GET_LOCK.
	namedLockPrefix = "dlock:"

	// maxIdleConns bounds the idle connections a Locker keeps for its
	// goroutines between uses.
	maxIdleConns = 2
)

// namedLocks holds a Locker's named locks and runs its waiters' watches.
//
// The holder goroutine, started when the Locker first holds a name, owns
// one connection and makes the named locks it holds match want; it puts
// the connection back (holding nothing) when want is empty, and exits
// then or when close cancels ctx. A connection that failed, or that
// could not release its locks, is discarded, which releases its locks on
// the server.
//
// Each name waited on has one watch goroutine, which owns one connection
// blocked in GET_LOCK and fans its wake-ups out to the Locker's waiters
// of that name; it exits when the last of them stops or close cancels
// ctx (ending a statement in flight by closing its connection).
//
// The goroutines take their connections from the pool and keep a few
// idle ones for the next goroutine; close returns those to the pool. A
// connection goes back to the pool only holding no named lock.
type namedLocks struct {
	db       *sql.DB
	loans    *loans // the budget of db's connections lent to wake-ups: lent
	table    string
	maxRetry time.Duration // the Locker's retry bound: the longest watch backoff

	ctx    context.Context // ends when close is called
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines

	mu      sync.Mutex
	closed  bool
	prefix  string             // hash input before the name: database and table; "" until known
	locker  string             // the Locker's id (its owners' prefix), once it has held a name; names its holder tag
	want    map[string]*wanted // names held here
	holding bool               // the holder goroutine runs
	kick    chan struct{}      // wakes the holder goroutine; buffered
	watches map[string]*watchSet
	idle    []*sql.Conn // connections kept for the next goroutine, with their slots
}

// newNamedLocks returns the named locks of a Locker on db whose table is
// table and whose retry bound is maxRetry. It starts no goroutine and
// borrows no connection until a name is held or waited on.
func newNamedLocks(db *sql.DB, table string, maxRetry time.Duration) *namedLocks {
	ctx, cancel := context.WithCancel(context.Background())
	return &namedLocks{
		db: db, loans: lent, table: table, maxRetry: maxRetry, ctx: ctx, cancel: cancel,
		want:    make(map[string]*wanted),
		kick:    make(chan struct{}, 1),
		watches: make(map[string]*watchSet),
	}
}

// A goroutine of namedLocks owns a slot: a reservation of loans.lend,
// and the connection it holds, if any. The idle connections kept for the
// next goroutine keep their slots.

// slot returns a slot for a new goroutine, with an idle connection if
// there is one; ok is false if the pool can spare none. n.mu is held.
func (n *namedLocks) slot() (conn *sql.Conn, ok bool) {
	if k := len(n.idle); k > 0 {
		conn = n.idle[k-1]
		n.idle = n.idle[:k-1]
		return conn, true
	}
	return nil, n.loans.lend(n.db)
}

// releaseConn ends a goroutine's slot: it keeps conn, which may hold
// named locks if locks is set, for the next goroutine, or returns it to
// the pool. A connection that fails to release its locks is discarded,
// so that the server releases them.
func (n *namedLocks) releaseConn(conn *sql.Conn, locks bool) {
	if conn != nil && locks {
		ctx, cancel := context.WithTimeout(context.Background(), dialects.CloseTimeout)
		_, err := conn.ExecContext(ctx, `DO RELEASE_ALL_LOCKS()`)
		cancel()
		if err != nil {
			discard(conn)
			conn = nil
		}
	}
	if conn != nil {
		n.mu.Lock()
		keep := !n.closed && len(n.idle) < maxIdleConns
		if keep {
			n.idle = append(n.idle, conn)
		}
		n.mu.Unlock()
		if keep {
			return
		}
		_ = conn.Close()
	}
	n.loans.giveBack(n.db)
}

// discard closes conn's connection to the server instead of returning it
// to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = conn.Close()
}

// key returns the named lock of name: the prefix and a hash of the
// database, the table and name, within MySQL's 64 characters.
func (n *namedLocks) key(conn *sql.Conn, name string) (string, error) {
	n.mu.Lock()
	prefix := n.prefix
	n.mu.Unlock()
	if prefix == "" {
		var db sql.NullString
		if err := conn.QueryRowContext(n.ctx, `SELECT DATABASE()`).Scan(&db); err != nil {
			return "", err
		}
		prefix = db.String + "\x00" + n.table + "\x00"
		n.mu.Lock()
		n.prefix = prefix
		n.mu.Unlock()
	}
	sum := sha256.Sum256([]byte(prefix + name))
	return namedLockPrefix + hex.EncodeToString(sum[:24]), nil
}

// holderTag returns the named lock that the holder connection of the
// Locker whose id is locker holds beside the names' (see evict).
func (n *namedLocks) holderTag(conn *sql.Conn, locker string) (string, error) {
	key, err := n.key(conn, "\x00holder\x00"+locker)
	return key, err
}

// close stops the goroutines and releases the named locks.
func (n *namedLocks) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	idle := n.idle
	n.idle = nil
	n.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
		n.loans.giveBack(n.db)
	}
}
