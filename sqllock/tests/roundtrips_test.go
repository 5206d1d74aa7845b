package sqllock_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// testResumeExtendTrips counts the round trips of Extend and Resume, in
// each mode, on a pool that wraps the database's driver (see countedDB).
// The adversary is a step that grows a statement per call: an exclusive
// lease's Extend and Resume are one statement each, except on MySQL:
// its Extend is two (the refresh reads back what its UPDATE extended),
// and its Resume adds the hand-over of the name's named lock, which the
// old holder's Locker holds here (a look-up, then KILL of that Locker's
// holder connection).
func testResumeExtendTrips(t *testing.T, db *sql.DB, dsn string, d sqllock.Dialect) {
	counted, trips := countedDB(t, db, dsn)
	// One connection: a statement prepared in the first round is
	// prepared on the connection of the second.
	counted.SetMaxOpenConns(1)
	_, from, err := testhook.New(db, d.String(), false)
	if err != nil {
		t.Fatalf("testhook.New(%v) = %v", d, err)
	}
	defer from.Close()
	_, to, err := testhook.New(counted, d.String(), false)
	if err != nil {
		t.Fatalf("testhook.New(%v) = %v", d, err)
	}
	defer to.Close()
	wantExtend := map[sqllock.Dialect]int64{sqllock.MySQL: 2, sqllock.PostgreSQL: 1, sqllock.SQLite: 1}[d]
	wantResume := map[sqllock.Dialect]int64{sqllock.MySQL: 3, sqllock.PostgreSQL: 1, sqllock.SQLite: 1}[d]
	modes := []struct {
		name   string
		shared bool
		limit  int
	}{{"exclusive", false, 0}, {"shared", true, 0}, {"permit", false, 2}}
	// The first round migrates and prepares the statements (MySQL and
	// PostgreSQL keep them prepared per connection): only the second
	// counts.
	for round, mode := range append(modes, modes...) {
		l := driver.Lease{Name: testkit.UniqueName(t, "trips") + "/" + mode.name, Owner: "tripsfrom0000000000000:1", TTL: time.Minute, Shared: mode.shared, Limit: mode.limit}
		res, err := from.Acquire(t.Context(), l)
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%q) = %+v, %v", l.Name, res, err)
		}
		l.Fence = res.Fence
		next := l
		next.Owner, next.TTL, next.Delay = "tripsto000000000000000:1", 2*time.Minute, time.Second
		before := trips.Load()
		if _, err := to.(driver.Resumer).Resume(t.Context(), l, next); err != nil {
			t.Fatalf("Resume(%q) = %v", l.Name, err)
		}
		resume := trips.Load() - before
		before = trips.Load()
		next.TTL = 3 * time.Minute
		if err := to.(driver.Extender).Extend(t.Context(), next); err != nil {
			t.Fatalf("Extend(%q) = %v", l.Name, err)
		}
		extend := trips.Load() - before
		if round < len(modes) {
			if err := to.Release(t.Context(), next); err != nil {
				t.Errorf("Release(%q) = %v", l.Name, err)
			}
			continue
		}
		t.Logf("%s: Resume %d round trips, Extend %d", mode.name, resume, extend)
		if mode.name == "exclusive" && (resume > wantResume || extend > wantExtend) {
			t.Errorf("exclusive: Resume %d round trips, Extend %d; want %d and %d", resume, extend, wantResume, wantExtend)
		}
		if err := to.Release(t.Context(), next); err != nil {
			t.Errorf("Release(%q) = %v", l.Name, err)
		}
	}
}
