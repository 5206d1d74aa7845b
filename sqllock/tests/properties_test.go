package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// newLocker returns a Locker on db, closed when the test ends.
func newLocker(t testing.TB, db *sql.DB, d sqllock.Dialect, opts *sqllock.Options) *dlock.Locker {
	t.Helper()
	l, err := sqllock.New(db, d, opts)
	if err != nil {
		t.Fatalf("New(%v, %+v) = %v, want a Locker", d, opts, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// holder returns the holder of name in table ("" for the default), or
// nil, as Locker.Inspect reports it.
func holder(t *testing.T, db *sql.DB, d sqllock.Dialect, table, name string) *dlock.LockInfo {
	t.Helper()
	h, err := inspect(t.Context(), newLocker(t, db, d, &sqllock.Options{Table: table}), name)
	if err != nil {
		t.Fatalf("Inspect(%q) = %v, want nil error", name, err)
	}
	return h
}

// inspect returns the holder of name as l.Inspect reports it, or nil.
func inspect(ctx context.Context, l *dlock.Locker, name string) (*dlock.LockInfo, error) {
	hs, err := l.Inspect(ctx, name)
	for _, h := range hs {
		if h.Name == name {
			return &h, err
		}
	}
	return nil, err
}

// rows counts the rows of name in the default table, held or not.
func rows(t *testing.T, db *sql.DB, d sqllock.Dialect, name string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + sqllock.DefaultTable + " WHERE name = ?"
	if d == sqllock.PostgreSQL {
		q = strings.Replace(q, "?", "$1", 1)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), q, name).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func testHostileNames(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	names := []string{
		"'; DROP TABLE x; --", `"; DROP TABLE x; --`, "`x`; DROP TABLE x", `\`, `\'`, `'`,
		"%", "_", "a%", "a_", "ab", "a", "A", "x", "x ", " x", "X",
		"$1", "?", ":name", "{t}", "dlock_locks",
		"锁", "🔒 lock", "e\u0301", "\u00e9",
		strings.Repeat("n", driver.MaxNameLen),
		strings.Repeat("é", driver.MaxNameLen/2) + "x",
	}
	a := newLocker(t, db, d, nil)
	b := newLocker(t, db, d, nil)
	var held []*dlock.Lock
	for _, name := range names {
		// Distinct names are distinct locks: a collision (case folding,
		// trailing spaces, LIKE wildcards, normalisation) fails here.
		held = append(held, testkit.MustTryAcquire(t, a, name))
	}
	for i, name := range names {
		testkit.WantNotAcquired(t, b, name, "while another owner holds it")
		h := holder(t, db, d, "", name)
		if h == nil || h.Fence != held[i].Fence() {
			t.Errorf("Inspect(%q) = %+v, want fence %d", name, h, held[i].Fence())
		}
	}
	for _, k := range held {
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
		}
	}
	for _, name := range names {
		k := testkit.MustTryAcquire(t, b, name)
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"nul\x00byte", strings.Repeat("n", driver.MaxNameLen+1), "\xff"} {
		if k, err := a.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrInvalid) {
			if k != nil {
				k.Release(t.Context())
			}
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

func testBadTable(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	for _, table := range []string{"x; DROP TABLE y", "1abc", "a-b", "a.b", `a"b`, "a`b", "tábla", " t", strings.Repeat("t", 64)} {
		if l, err := sqllock.New(db, d, &sqllock.Options{Table: table}); !errors.Is(err, dlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with Table %q = %v, want ErrInvalid", table, err)
		}
		if err := sqllock.Migrate(ctx, db, d, table); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Migrate(%q) = %v, want ErrInvalid", table, err)
		}
	}
	for _, bad := range []sqllock.Dialect{0, 99} {
		if l, err := sqllock.New(db, bad, nil); !errors.Is(err, dlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with Dialect(%d) = %v, want ErrInvalid", bad, err)
		}
	}
	if l, err := sqllock.New(nil, d, nil); !errors.Is(err, dlock.ErrInvalid) {
		if l != nil {
			l.Close()
		}
		t.Errorf("New with a nil *sql.DB = %v, want ErrInvalid", err)
	}
}

// testInspect checks Locker.Inspect and Locker.ForceRelease, the admin
// API: another Locker sees the holder with its token, metadata and lease
// left, and frees the name; the holder's Done closes.
func testInspect(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	const ttl = 3 * time.Second
	l := newLocker(t, db, d, nil)
	admin := newLocker(t, db, d, nil)
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(ttl), dlock.WithMetadata("host=h pid=1"))
	h, err := inspect(t.Context(), admin, name)
	if err != nil || h == nil || h.Fence != k.Fence() || h.Owner == "" || h.Metadata != "host=h pid=1" || h.Remaining <= 0 || h.Remaining > ttl {
		t.Fatalf("Inspect(%q) = %+v, %v, want fence %d, an owner, the metadata and remaining in (0, %v]", name, h, err, k.Fence(), ttl)
	}
	if all, err := admin.Inspect(t.Context()); err != nil || !slices.ContainsFunc(all, func(h dlock.LockInfo) bool { return h.Name == name }) {
		t.Errorf("Inspect() = %+v, %v, want a list with %q", all, err, name)
	}
	if held, err := admin.ForceRelease(t.Context(), name); !held || err != nil {
		t.Fatalf("ForceRelease(%q) = %v, %v, want true, nil", name, held, err)
	}
	if h := holder(t, db, d, "", name); h != nil {
		t.Errorf("Inspect(%q) after ForceRelease = %+v, want nothing", name, h)
	}
	select {
	case <-k.Done():
	case <-time.After(ttl):
		t.Fatalf("Done of %q not closed %v after ForceRelease", name, ttl)
	}
	if held, err := admin.ForceRelease(t.Context(), name); held || err != nil {
		t.Errorf("second ForceRelease(%q) = %v, %v, want false, nil", name, held, err)
	}
}

func testCustomTable(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	const table = "custom_locks"
	for range 2 { // Migrate is idempotent
		if err := sqllock.Migrate(t.Context(), db, d, table); err != nil {
			t.Fatalf("Migrate(%q) = %v, want nil", table, err)
		}
	}
	custom := newLocker(t, db, d, &sqllock.Options{Table: table})
	def := newLocker(t, db, d, nil)
	name := testkit.UniqueName(t, "sqllock")
	k1 := testkit.MustTryAcquire(t, custom, name)
	k2 := testkit.MustTryAcquire(t, def, name) // another table, another lock
	if h := holder(t, db, d, table, name); h == nil || h.Fence != k1.Fence() {
		t.Errorf("Inspect(%q) on table %q = %+v, want fence %d", name, table, h, k1.Fence())
	}
	k1.Release(t.Context())
	k2.Release(t.Context())
}

// testCleanup checks that idle rows are deleted, held rows are not, and a
// name whose row was deleted still gets a larger token; a retention
// below the clock bound is raised to it.
func testCleanup(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	opts := &sqllock.Options{IdleRetention: time.Millisecond, ClockBound: time.Millisecond}
	a := newLocker(t, db, d, opts)
	idle, busy := testkit.UniqueName(t, "sqllock")+"/idle", testkit.UniqueName(t, "sqllock")+"/busy"
	k := testkit.MustTryAcquire(t, a, idle) // a's first acquire cleans up
	first := k.Fence()
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", idle, err)
	}
	held := testkit.MustTryAcquire(t, newLocker(t, db, d, nil), busy, dlock.WithTTL(5*time.Second))
	if n := rows(t, db, d, idle); n != 1 {
		t.Fatalf("rows of %q after release = %d, want 1 (kept for its token)", idle, n)
	}
	time.Sleep(50 * time.Millisecond)
	// With the default clock bound the retention is 10s, not 1ms.
	c := newLocker(t, db, d, &sqllock.Options{IdleRetention: time.Millisecond})
	testkit.MustTryAcquire(t, c, testkit.UniqueName(t, "sqllock")+"/bound").Release(t.Context()) // c's first acquire cleans up
	if n := rows(t, db, d, idle); n != 1 {
		t.Fatalf("rows of %q idle for 50ms after a cleanup with IdleRetention 1ms and the default clock bound = %d, want 1 (the retention raised to the bound)", idle, n)
	}
	b := newLocker(t, db, d, opts)
	k = testkit.MustTryAcquire(t, b, testkit.UniqueName(t, "sqllock")+"/other") // b's first acquire cleans up
	k.Release(t.Context())
	if n := rows(t, db, d, idle); n != 0 {
		t.Errorf("rows of %q idle past the retention after a cleanup = %d, want 0", idle, n)
	}
	if n := rows(t, db, d, busy); n != 1 {
		t.Errorf("rows of held %q after a cleanup = %d, want 1", busy, n)
	}
	testkit.WantNotAcquired(t, b, busy, "while another owner holds it")
	k = testkit.MustTryAcquire(t, b, idle)
	if k.Fence() <= first {
		t.Errorf("Fence of %q after its row was deleted = %d, want > %d", idle, k.Fence(), first)
	}
	k.Release(t.Context())
	held.Release(t.Context())
}
