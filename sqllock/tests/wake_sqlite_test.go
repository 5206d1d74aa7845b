package sqllock_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// sqliteNeverPolls is a MaxRetryInterval longer than any test: a waiter
// or observer with it only moves when it is woken.
const sqliteNeverPolls = time.Hour

// TestSQLiteWakesOtherLockers checks that a release wakes waiters and
// observers in a Locker that shares nothing with the releasing one but
// the database file, as processes on one host do: their own polling is
// an hour apart, and the holder's lease lasts an hour.
func TestSQLiteWakesOtherLockers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SQLite waiters poll outside Linux")
	}
	path := filepath.Join(t.TempDir(), "locks.db")
	holder := newLocker(t, openSQLite(t, path), sqllock.SQLite, nil)
	other := newLocker(t, openSQLite(t, path), sqllock.SQLite, &sqllock.Options{MaxRetryInterval: sqliteNeverPolls})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const name = "wake"

	k, err := holder.Acquire(ctx, name, dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want the lock", name, err)
	}
	changes, err := other.Observe(ctx, name)
	if err != nil {
		t.Fatalf("Observe(%q) = %v", name, err)
	}
	if hs := <-changes; len(hs) != 1 {
		t.Fatalf("Observe(%q) first = %v, want the holder", name, hs)
	}
	got := acquireRelease(ctx, other, name)
	// The waiter created its wake file once it watches.
	for {
		files, _ := filepath.Glob(path + "-wake/*[0-9a-f]")
		if len(files) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Acquire(%q) in another Locker made no wake file in %s-wake", name, path)
		}
		time.Sleep(time.Millisecond)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	if err := <-got; err != nil {
		t.Errorf("Acquire(%q) in another Locker after the release = %v, want the lock (woken, not polling)", name, err)
	}
	for hs := range changes {
		if len(hs) == 0 {
			return
		}
	}
	t.Errorf("Observe(%q) in another Locker saw no release before %v", name, ctx.Err())
}

// TestSQLiteMemoryPolls checks that an in-memory database, which has no
// file to put wake files next to, still hands a lock to a waiting Locker:
// by polling.
func TestSQLiteMemoryPolls(t *testing.T) {
	db := openSQLite(t, ":memory:")
	db.SetMaxOpenConns(1) // one connection, one in-memory database
	holder := newLocker(t, db, sqllock.SQLite, nil)
	waiter := newLocker(t, db, sqllock.SQLite, nil)
	ctx := t.Context()
	const name = "memory"
	k, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want the lock", name, err)
	}
	starts := testkit.WatchStarts(waiter)
	got := acquireRelease(ctx, waiter, name)
	starts.WaitInAcquire(t, name, 1)
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	if err := <-got; err != nil {
		t.Errorf("Acquire(%q) in another Locker on :memory: = %v, want the lock", name, err)
	}
}

// acquireRelease acquires name on l and releases it, in a goroutine, and
// returns the channel that receives the error.
func acquireRelease(ctx context.Context, l *dlock.Locker, name string) <-chan error {
	got := make(chan error, 1)
	go func() { // exits when Acquire and Release return
		k, err := l.Acquire(ctx, name)
		if err == nil {
			err = k.Release(ctx)
		}
		got <- err
	}()
	return got
}
