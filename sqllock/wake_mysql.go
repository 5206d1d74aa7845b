package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// MySQL has no notifications, but it has a queue: a session blocked in
// GET_LOCK(key, timeout) returns as soon as the session holding key
// releases it or ends. So while a Locker holds a name exclusively it also
// holds a named lock derived from the name, on one connection of its own,
// and a waiter blocks in GET_LOCK on that key as its wake-up. The table
// stays the only source of truth: the named lock is taken after the row
// and released after the row is freed, so a waiter whose GET_LOCK returns
// may find the row free, and a lost or spurious wake-up costs latency,
// never safety (the core still polls no slower than MaxRetryInterval).
//
// GET_LOCK is level-triggered: a waiter whose GET_LOCK reaches the server
// after the holder released the key gets it at once. So a Watch is active
// as soon as it returns, whether or not its statement has been sent.
const (
	// namedLockPrefix starts every named lock dlock takes, so that it
	// shares no name with other applications' GET_LOCK.
	namedLockPrefix = "dlock:"

	// watchTimeout is the GET_LOCK timeout of a waiter, in seconds: a
	// waiter whose statement outlives its connection (cancelled by
	// closing it) leaves the server's queue within it.
	watchTimeout = 5

	// maxLentConns bounds the connections of one pool that its Lockers
	// keep for wake-ups (one per Locker holding names, one per name
	// waited on in each Locker) when the pool has no limit; a pool with a
	// limit (sql.DB.SetMaxOpenConns) lends a quarter of it, none below 4.
	// Waiters beyond the bound poll, and so do waiters of a name whose
	// holder got no connection.
	maxLentConns = 32

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

	// takeDelay is how long a name is held before its named lock is
	// taken: the short holds of an uncontended name cost the database no
	// named lock, and their waiters, which find the key free, retry soon
	// (see minWatchBackoff).
	takeDelay = 2 * time.Millisecond

	// minTakeBackoff is the first pause before a holder tries again to
	// take a key another session holds (the previous holder not yet
	// done releasing, or a waiter's instant pass through); it doubles up
	// to maxTakeBackoff.
	minTakeBackoff = time.Millisecond
	maxTakeBackoff = 100 * time.Millisecond

	// maxIdleConns bounds the idle connections a Locker keeps for its
	// goroutines between uses.
	maxIdleConns = 2
)

var errNoWatchConn = errors.New("no connection left for wake-ups")

// mysqlDriver adds wake-ups by named locks to the MySQL driver.
type mysqlDriver struct {
	*sqlDriver
	wk *namedLocks
}

func (d *mysqlDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	res, err := d.sqlDriver.Acquire(ctx, l)
	if err == nil && res.Acquired && !l.Shared && l.Limit == 0 {
		d.wk.take(l.Name, l.Owner)
	}
	return res, err
}

func (d *mysqlDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := d.sqlDriver.Refresh(ctx, ls)
	for i, err := range errs {
		if errors.Is(err, driver.ErrNotHeld) {
			d.wk.drop(ls[i].Name, ls[i].Owner)
		}
	}
	return errs
}

// Release frees the row, then the named lock, whatever the row's
// outcome: a lease found lost holds nothing either.
func (d *mysqlDriver) Release(ctx context.Context, l driver.Lease) error {
	err := d.sqlDriver.Release(ctx, l)
	if !l.Shared && l.Limit == 0 {
		d.wk.drop(l.Name, l.Owner)
	}
	return err
}

func (d *mysqlDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop, err := d.wk.watch(name)
	if err != nil {
		return nil, nil, fmt.Errorf("sqllock: watch %q: %w", name, err)
	}
	return w, stop, nil
}

func (d *mysqlDriver) Close() error {
	d.wk.close()
	return d.sqlDriver.Close()
}

var (
	_ driver.Driver   = (*mysqlDriver)(nil)
	_ driver.Notifier = (*mysqlDriver)(nil)
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
	table    string
	maxRetry time.Duration // the Locker's retry bound: the longest watch backoff

	ctx    context.Context // ends when close is called
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines

	mu      sync.Mutex
	closed  bool
	prefix  string             // hash input before the name: database and table; "" until known
	want    map[string]*wanted // names held here
	holding bool               // the holder goroutine runs
	kick    chan struct{}      // wakes the holder goroutine; buffered
	watches map[string]*watchSet
	idle    []*sql.Conn // connections kept for the next goroutine, with their slots
}

// wanted is a name held here: by which owners, since when.
type wanted struct {
	owners map[string]struct{}
	since  time.Time // when the first of them took it
}

// watchSet is one name's watch: its waiters' channels and how to stop it.
type watchSet struct {
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	joined chan struct{} // buffered: a waiter joined, poll from the shortest backoff again
}

func newNamedLocks(db *sql.DB, table string, maxRetry time.Duration) *namedLocks {
	ctx, cancel := context.WithCancel(context.Background())
	return &namedLocks{
		db: db, table: table, maxRetry: maxRetry, ctx: ctx, cancel: cancel,
		want:    make(map[string]*wanted),
		kick:    make(chan struct{}, 1),
		watches: make(map[string]*watchSet),
	}
}

// lent counts, per pool, the connections its Lockers keep out of it for
// wake-ups, so that Lockers sharing a small pool leave it enough for
// their steps.
var lent = struct {
	sync.Mutex
	n map[*sql.DB]int
}{n: make(map[*sql.DB]int)}

// lend reserves one of db's connections for wake-ups if the pool can
// spare it.
func lend(db *sql.DB) bool {
	capacity := lentConns(db.Stats().MaxOpenConnections)
	lent.Lock()
	defer lent.Unlock()
	if lent.n[db] >= capacity {
		return false
	}
	lent.n[db]++
	return true
}

// lentConns is how many connections of a pool of limit connections (0:
// no limit) its Lockers may keep for wake-ups: a quarter, at most
// maxLentConns.
func lentConns(limit int) int {
	if limit <= 0 {
		return maxLentConns
	}
	return min(limit/4, maxLentConns)
}

// giveBack ends a reservation of lend.
func giveBack(db *sql.DB) {
	lent.Lock()
	defer lent.Unlock()
	if lent.n[db]--; lent.n[db] <= 0 {
		delete(lent.n, db)
	}
}

// take records that owner holds name, and has the holder goroutine take
// the name's named lock.
func (n *namedLocks) take(name, owner string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	w := n.want[name]
	if w == nil {
		w = &wanted{owners: make(map[string]struct{}), since: time.Now()}
		n.want[name] = w
	}
	w.owners[owner] = struct{}{}
	n.startHolder()
}

// drop records that owner no longer holds name, and has the holder
// goroutine release the name's named lock if no other owner here holds
// it.
func (n *namedLocks) drop(name, owner string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.want[name]
	if !ok {
		return
	}
	delete(w.owners, owner)
	if len(w.owners) == 0 {
		delete(n.want, name)
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// startHolder starts the holder goroutine if it is not running and the
// pool can lend it a connection, or kicks it. n.mu is held.
func (n *namedLocks) startHolder() {
	if !n.holding {
		conn, ok := n.slot()
		if !ok {
			return
		}
		n.holding = true
		n.wg.Add(1)
		go n.hold(conn) // exits when want is empty and its locks are released, or at close
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// hold is the holder goroutine. It owns a slot (see slot) and conn, if
// not nil.
func (n *namedLocks) hold(conn *sql.Conn) {
	defer n.wg.Done()
	var (
		have    = make(map[string]bool) // named locks held on conn
		backoff time.Duration           // pause before retrying a key held elsewhere
	)
	defer func() { n.releaseConn(conn, len(have) > 0) }()
	for {
		add, remove, due, done := n.plan(have)
		if done {
			return
		}
		var err error
		if len(add)+len(remove) > 0 {
			if conn == nil {
				conn, err = n.db.Conn(n.ctx)
			}
			if err == nil {
				err = n.sync(conn, have, add, remove)
			}
			if err != nil && conn != nil {
				// The connection failed: whatever it held, the server
				// released when it ended, or will when we discard it.
				discard(conn)
				conn = nil
				clear(have)
			}
		}
		wait := due
		if missed := err != nil || slices.ContainsFunc(add, func(name string) bool { return !have[name] }); missed {
			backoff = min(max(2*backoff, minTakeBackoff), maxTakeBackoff)
			wait = min(wait, backoff)
		} else {
			backoff = 0
		}
		if wait == maxWait && len(add)+len(remove) > 0 {
			continue // plan again: what changed meanwhile, or exit
		}
		t := time.NewTimer(wait)
		select {
		case <-n.kick:
		case <-t.C:
		case <-n.ctx.Done():
		}
		t.Stop()
	}
}

// maxWait stands for "no deadline" in hold.
const maxWait = time.Duration(1<<63 - 1)

// plan returns the named locks the holder goroutine should take (names
// held for at least takeDelay) and release, given those it has, and how
// long until the next name is due (maxWait if none). done is set (and
// holding cleared) when the goroutine should exit: nothing to hold, or
// close.
func (n *namedLocks) plan(have map[string]bool) (add, remove []string, due time.Duration, done bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.want) == 0 && len(have) == 0 {
		n.holding = false
		return nil, nil, 0, true
	}
	due = maxWait
	now := time.Now()
	for name, w := range n.want {
		switch age := now.Sub(w.since); {
		case have[name]:
		case age >= takeDelay:
			add = append(add, name)
		default:
			due = min(due, takeDelay-age)
		}
	}
	for name := range have {
		if _, ok := n.want[name]; !ok {
			remove = append(remove, name)
		}
	}
	return add, remove, due, false
}

// sync releases the named locks of remove and tries to take those of add
// (without waiting) on conn, recording in have what conn holds. A key
// another session holds stays out of have, to be tried again.
func (n *namedLocks) sync(conn *sql.Conn, have map[string]bool, add, remove []string) error {
	for _, name := range remove {
		key, err := n.key(conn, name)
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(n.ctx, `DO RELEASE_LOCK(?)`, key); err != nil {
			return err
		}
		delete(have, name)
	}
	for _, name := range add {
		key, err := n.key(conn, name)
		if err != nil {
			return err
		}
		var got sql.NullInt64
		if err := conn.QueryRowContext(n.ctx, `SELECT GET_LOCK(?, 0)`, key).Scan(&got); err != nil {
			return err
		}
		if got.Int64 == 1 {
			have[name] = true
		}
	}
	return nil
}

// A goroutine of namedLocks owns a slot: a reservation of lend, and the
// connection it holds, if any. The idle connections kept for the next
// goroutine keep their slots.

// slot returns a slot for a new goroutine, with an idle connection if
// there is one; ok is false if the pool can spare none. n.mu is held.
func (n *namedLocks) slot() (conn *sql.Conn, ok bool) {
	if k := len(n.idle); k > 0 {
		conn = n.idle[k-1]
		n.idle = n.idle[:k-1]
		return conn, true
	}
	return nil, lend(n.db)
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
	giveBack(n.db)
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
		giveBack(n.db)
	}
}
