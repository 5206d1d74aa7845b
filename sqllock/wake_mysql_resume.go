package sqllock

import (
	"context"
	"database/sql"
	"strconv"
)

// The named lock of a resumed hold (see wake_mysql.go). A hold resumed
// from another Locker leaves that Locker's holder connection holding the
// name's key until its own next renewal finds the hold gone (up to a
// third of its TTL later): a waiter blocked on the key would not be woken
// by the new holder's release. So the resuming Locker ends that
// connection, when it can tell that the session holding the key is the
// old Locker's holder connection (it holds the old Locker's tag too) and
// is allowed to (an account may kill its own sessions; another needs
// CONNECTION ADMIN): the key is then free for the new holder, and the
// waiters blocked on it wake once. The old Locker's other names lose
// their keys with it: their waiters wake once for nothing and poll until
// that Locker's holder goroutine takes them again on a new connection,
// at its next change (the old hold's renewal, at the latest). When it
// cannot end it, waiters are woken by the old Locker's renewal or their
// own poll, as before.

// handOver has this Locker hold name's key for to (a hold resumed from
// from): from's Locker is this one (its key is kept, from dropped), or
// another, whose holder connection evict ends.
func (n *namedLocks) handOver(ctx context.Context, name, from, to string) {
	n.mu.Lock()
	local := false
	if w := n.want[name]; w != nil {
		_, local = w.owners[from]
	}
	n.mu.Unlock()
	n.take(name, to)
	if local {
		n.drop(name, from)
		return
	}
	n.evict(ctx, name, lockerOf(from))
}

// evict ends the session that holds name's key if it is also the one
// holding the tag of the Locker whose id is locker: that Locker's holder
// connection. Errors are ignored: the wake-up is a hint.
func (n *namedLocks) evict(ctx context.Context, name, locker string) {
	conn, err := n.db.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	key, err := n.key(conn, name)
	if err != nil {
		return
	}
	tag, err := n.holderTag(conn, locker)
	if err != nil {
		return
	}
	var id sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT IF(IS_USED_LOCK(?) = IS_USED_LOCK(?), IS_USED_LOCK(?), NULL)`, key, tag, key).Scan(&id); err != nil || !id.Valid {
		return
	}
	_, _ = conn.ExecContext(ctx, `KILL CONNECTION `+strconv.FormatInt(id.Int64, 10))
}
