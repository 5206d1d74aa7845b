package sqllock_test

import (
	"database/sql"
	"testing"
)

// warmPool opens n connections in db's pool and keeps them idle. A MySQL
// Locker borrows connections from the pool for its wake-ups (one to hold
// named locks, one per name waited on); with idle connections to spare,
// the pool opens none while a test borrows them, so that goroutine checks
// (the conformance suite's Close) see only the Locker's own goroutines.
func warmPool(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	db.SetMaxIdleConns(n)
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatalf("Conn() = %v, want a connection", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}
