package sqllock

import (
	"database/sql"
	"slices"
	"strings"
	"time"
)

// The holder's side of MySQL wake-ups (see wake_mysql.go): while the
// Locker holds names exclusively, one goroutine holds their named locks on
// one borrowed connection, taking each a little after the row and
// releasing it after the row is freed.

const (
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
)

// wanted is a name held here: by which owners, since when.
type wanted struct {
	owners map[string]struct{}
	since  time.Time // when the first of them took it
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
	if n.locker == "" {
		n.locker = lockerOf(owner)
	}
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
		tagged  bool                    // conn holds the Locker's holder tag
		backoff time.Duration           // pause before retrying a key held elsewhere
	)
	defer func() { n.releaseConn(conn, len(have) > 0 || tagged) }()
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
			if err == nil && !tagged {
				tagged, err = n.tag(conn)
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
				tagged = false
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

// tag takes the Locker's holder tag on conn, the holder connection, so
// that a Locker that resumes one of its holds can tell that connection
// from any other session holding the name's key (see evict). It reports
// whether conn holds it.
func (n *namedLocks) tag(conn *sql.Conn) (bool, error) {
	n.mu.Lock()
	locker := n.locker
	n.mu.Unlock()
	tag, err := n.holderTag(conn, locker)
	if err != nil {
		return false, err
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(n.ctx, `SELECT GET_LOCK(?, 0)`, tag).Scan(&got)
	return got.Int64 == 1, err
}

// lockerOf returns the Locker id of owner (see driver.Lease.Owner).
func lockerOf(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i >= 0 {
		return owner[:i]
	}
	return owner
}
