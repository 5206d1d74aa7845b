package jepsen

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// useSQLiteClock puts julianday('now') on the Clock, steps included.
func TestSQLiteClock(t *testing.T) {
	c := testserver.NewClock(t)
	if err := useSQLiteClock(c.File()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "clock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const query = `SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
	read := func() time.Duration {
		t.Helper()
		var ms int64
		if err := db.QueryRow(query).Scan(&ms); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return time.Until(time.UnixMilli(ms)) // the SQLite clock's lead on ours
	}
	// Generous bounds: a reading is late by at most the query's duration.
	if got := read(); got > time.Second || got < -time.Second {
		t.Errorf("SQLite's clock before a step leads the host's by %v, want about 0", got)
	}
	c.Step(-5 * time.Second)
	if got := read(); got > -4*time.Second || got < -6*time.Second {
		t.Errorf("SQLite's clock after a step of -5s leads the host's by %v, want about -5s", got)
	}
	c.Step(15 * time.Second)
	if got := read(); got < 9*time.Second || got > 11*time.Second {
		t.Errorf("SQLite's clock after steps of -5s, +15s leads the host's by %v, want about 10s", got)
	}
	var s string
	if err := db.QueryRow(`SELECT julianday('2020-01-01')`).Scan(&s); err == nil {
		t.Errorf("julianday('2020-01-01') = %q, want an error (only 'now' is known)", s)
	}
}
