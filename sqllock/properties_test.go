package sqllock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// uniqueName returns a lock name no other test uses.
func uniqueName(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	return "sqllock/" + t.Name() + "/" + hex.EncodeToString(b[:])
}

func newLocker(t testing.TB, db *sql.DB, d sqllock.Dialect, opts *sqllock.Options) *dlock.Locker {
	t.Helper()
	l := sqllock.New(db, d, opts)
	t.Cleanup(func() { l.Close() })
	return l
}

// holder returns the holder of name in table ("" for the default), or
// nil.
func holder(t *testing.T, db *sql.DB, d sqllock.Dialect, table, name string) *sqllock.Holder {
	t.Helper()
	hs, err := sqllock.Holders(t.Context(), db, d, table)
	if err != nil {
		t.Fatalf("Holders() = %v, want nil error", err)
	}
	for _, h := range hs {
		if h.Name == name {
			return &h
		}
	}
	return nil
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
		strings.Repeat("n", dlock.MaxNameLen),
		strings.Repeat("é", dlock.MaxNameLen/2) + "x",
	}
	a := newLocker(t, db, d, nil)
	b := newLocker(t, db, d, nil)
	var held []*dlock.Lock
	for _, name := range names {
		// Distinct names are distinct locks: a collision (case folding,
		// trailing spaces, LIKE wildcards, normalisation) fails here.
		held = append(held, mustAcquire(t, a, name))
	}
	for i, name := range names {
		wantNotAcquired(t, b, name)
		h := holder(t, db, d, "", name)
		if h == nil || h.Fence != held[i].Fence() {
			t.Errorf("Holders() entry for %q = %+v, want fence %d", name, h, held[i].Fence())
		}
	}
	for _, k := range held {
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
		}
	}
	for _, name := range names {
		k := mustAcquire(t, b, name)
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"nul\x00byte", strings.Repeat("n", dlock.MaxNameLen+1), "\xff"} {
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
		l := sqllock.New(db, d, &sqllock.Options{Table: table})
		if k, err := l.TryAcquire(ctx, "n"); !errors.Is(err, dlock.ErrInvalid) {
			if k != nil {
				k.Release(ctx)
			}
			t.Errorf("Table %q: TryAcquire = %v, want ErrInvalid", table, err)
		}
		l.Close()
		if err := sqllock.Migrate(ctx, db, d, table); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Migrate(%q) = %v, want ErrInvalid", table, err)
		}
		if _, err := sqllock.Holders(ctx, db, d, table); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Holders(%q) = %v, want ErrInvalid", table, err)
		}
		if err := sqllock.ForceRelease(ctx, db, d, table, "n"); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("ForceRelease(%q) = %v, want ErrInvalid", table, err)
		}
	}
	for _, bad := range []sqllock.Dialect{0, 99} {
		l := sqllock.New(db, bad, nil)
		if _, err := l.TryAcquire(ctx, "n"); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Dialect(%d): TryAcquire = %v, want ErrInvalid", bad, err)
		}
		l.Close()
	}
	l := sqllock.New(nil, d, nil)
	if _, err := l.TryAcquire(ctx, "n"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("nil *sql.DB: TryAcquire = %v, want ErrInvalid", err)
	}
	l.Close()
}

func testHolders(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	const ttl = 3 * time.Second
	l := newLocker(t, db, d, nil)
	name := uniqueName(t)
	k := mustAcquire(t, l, name, dlock.WithTTL(ttl))
	h := holder(t, db, d, "", name)
	if h == nil || h.Fence != k.Fence() || h.Owner == "" || h.Remaining <= 0 || h.Remaining > ttl {
		t.Fatalf("Holders() entry for %q = %+v, want fence %d, an owner and remaining in (0, %v]", name, h, k.Fence(), ttl)
	}
	if err := sqllock.ForceRelease(t.Context(), db, d, "", name); err != nil {
		t.Fatalf("ForceRelease(%q) = %v, want nil", name, err)
	}
	if h := holder(t, db, d, "", name); h != nil {
		t.Errorf("Holders() after ForceRelease lists %+v", h)
	}
	select {
	case <-k.Done():
	case <-time.After(ttl):
		t.Fatalf("Done of %q not closed %v after ForceRelease", name, ttl)
	}
	if err := sqllock.ForceRelease(t.Context(), db, d, "", name); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second ForceRelease(%q) = %v, want ErrNotHeld", name, err)
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
	name := uniqueName(t)
	k1 := mustAcquire(t, custom, name)
	k2 := mustAcquire(t, def, name) // another table, another lock
	if h := holder(t, db, d, table, name); h == nil || h.Fence != k1.Fence() {
		t.Errorf("Holders(%q) entry for %q = %+v, want fence %d", table, name, h, k1.Fence())
	}
	k1.Release(t.Context())
	k2.Release(t.Context())
}

// testCleanup checks that idle rows are deleted, held rows are not, and a
// name whose row was deleted still gets a larger token.
func testCleanup(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	opts := &sqllock.Options{IdleRetention: time.Millisecond}
	a := newLocker(t, db, d, opts)
	idle, busy := uniqueName(t)+"/idle", uniqueName(t)+"/busy"
	k := mustAcquire(t, a, idle) // a's first acquire cleans up
	first := k.Fence()
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", idle, err)
	}
	held := mustAcquire(t, newLocker(t, db, d, nil), busy, dlock.WithTTL(5*time.Second))
	if n := rows(t, db, d, idle); n != 1 {
		t.Fatalf("rows of %q after release = %d, want 1 (kept for its token)", idle, n)
	}
	time.Sleep(50 * time.Millisecond)
	b := newLocker(t, db, d, opts)
	k = mustAcquire(t, b, uniqueName(t)+"/other") // b's first acquire cleans up
	k.Release(t.Context())
	if n := rows(t, db, d, idle); n != 0 {
		t.Errorf("rows of %q idle past the retention after a cleanup = %d, want 0", idle, n)
	}
	if n := rows(t, db, d, busy); n != 1 {
		t.Errorf("rows of held %q after a cleanup = %d, want 1", busy, n)
	}
	wantNotAcquired(t, b, busy)
	k = mustAcquire(t, b, idle)
	if k.Fence() <= first {
		t.Errorf("Fence of %q after its row was deleted = %d, want > %d", idle, k.Fence(), first)
	}
	k.Release(t.Context())
	held.Release(t.Context())
}

// eventually retries f until it succeeds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
