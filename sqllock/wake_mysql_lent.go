package sqllock

import (
	"database/sql"
	"sync"
)

// MySQL's wake-ups borrow their connections from the caller's pool (see
// namedLocks), and keep them for as long as a name is held or waited on:
// a watch blocks in GET_LOCK on its connection again and again until its
// last waiter stops. So the connections lent to wake-ups must be bounded
// per pool, not per Locker, or Lockers sharing a pool would take it from
// their own steps.

// maxLentConns bounds the connections of one pool that its Lockers keep
// for wake-ups (one per Locker holding names, one per name waited on in
// each Locker) when the pool has no limit; a pool with a limit
// (sql.DB.SetMaxOpenConns) lends a quarter of it, none below 4. Waiters
// beyond the bound poll, and so do waiters of a name whose holder got no
// connection.
const maxLentConns = 32

// lentConns is how many connections of a pool of limit connections (0:
// no limit) its Lockers may keep for wake-ups: a quarter, at most
// maxLentConns.
func lentConns(limit int) int {
	if limit <= 0 {
		return maxLentConns
	}
	return min(limit/4, maxLentConns)
}

// lent is the process's record of the connections each pool has lent to
// wake-ups: sqllock's only package-level mutable state, and its only
// state kept per pool (statement caches and the bound on acquisitions
// belong to each Locker).
//
// It must be global. The budget belongs to the pool, a *sql.DB that
// Lockers made by separate New calls share without knowing of each other
// (one Locker per table, or per tenant, on one pool), and a *sql.DB has no
// room for its users' state. A record kept by each Locker would let k of
// them lend k budgets: four Lockers waiting on a pool of 8 (budget 2)
// would keep all 8 connections blocked in GET_LOCK, and every renewal,
// release and retry would then wait for a connection that no waiter gives
// back until its wait ends, while the leases run out. tests' MySQL
// Wakeups/SharedBudget shows the budget held by two Lockers on one pool.
//
// A pool has an entry only while it lends a connection (a Locker's Close
// gives its connections back), so lent keeps alive no pool that no Locker
// uses.
var lent = &loans{n: make(map[*sql.DB]int)}

// loans counts the connections each pool has lent to wake-ups.
type loans struct {
	mu sync.Mutex
	n  map[*sql.DB]int // connections lent, per pool; no entry for none
}

// lend reserves one of db's connections for wake-ups if the pool can
// spare it.
func (l *loans) lend(db *sql.DB) bool {
	budget := lentConns(db.Stats().MaxOpenConnections)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[db] >= budget {
		return false
	}
	l.n[db]++
	return true
}

// giveBack ends a reservation of lend.
func (l *loans) giveBack(db *sql.DB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[db]--; l.n[db] <= 0 {
		delete(l.n, db)
	}
}
