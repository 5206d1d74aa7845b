package sqllock

import (
	"database/sql"
	"sync"
)

const (
	// maxLentConns bounds the connections of one pool that its Lockers
	// keep for wake-ups (one per Locker holding names, one per name
	// waited on in each Locker) when the pool has no limit; a pool with a
	// limit (sql.DB.SetMaxOpenConns) lends a quarter of it, none below 4.
	// Waiters beyond the bound poll, and so do waiters of a name whose
	// holder got no connection.
	maxLentConns = 32
)

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
