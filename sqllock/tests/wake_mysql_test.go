package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
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

// testMySQLWakeups runs the properties of MySQL's wake-ups by named
// locks.
func testMySQLWakeups(t *testing.T, db *sql.DB, dsn string) {
	t.Run("WokenByServer", func(t *testing.T) { testWokenByServer(t, db) })
	t.Run("CancelledWatch", func(t *testing.T) { testCancelledWatch(t, db) })
	t.Run("SmallPool", func(t *testing.T) { testSmallPool(t, dsn) })
	t.Run("SharedBudget", func(t *testing.T) { testSharedBudget(t, db, dsn) })
}

// userLockWaits returns how many sessions of the server wait in GET_LOCK.
func userLockWaits(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'`).Scan(&n); err != nil {
		t.Fatalf("count GET_LOCK waits: %v", err)
	}
	return n
}

// testWokenByServer: a waiter in another Locker blocks in the server's
// GET_LOCK queue while the holder holds the name, and the release wakes
// it: it acquires in a few attempts, although it would otherwise retry no
// sooner than the holder's lease (an hour) or its retry bound (an hour).
func testWokenByServer(t *testing.T, db *sql.DB) {
	name := testkit.UniqueName(t, "sqllock")
	holder := newLocker(t, db, sqllock.MySQL, nil)
	waiter := newLocker(t, db, sqllock.MySQL, &sqllock.Options{MaxRetryInterval: time.Hour})
	attempts := make(chan int, 1)
	waiter.AddHook(hook.Hook{AcquireDone: func(_ context.Context, e hook.AcquireDone) {
		if e.Name == name {
			attempts <- e.Attempts
		}
	}})
	before := userLockWaits(t, db)
	k, err := holder.Acquire(t.Context(), name, dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
	}
	got := acquireAndRelease(t, waiter, name)
	testkit.Eventually(t, "waiter blocked in GET_LOCK", func() bool { return userLockWaits(t, db) > before })
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", name, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiting Acquire(%q) = %v, want a lock", name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("waiting Acquire(%q) not woken a minute after the release", name)
	}
	// First try, the try after subscribing, the try after the wake-up;
	// one more for a spurious wake-up.
	if n := <-attempts; n > 4 {
		t.Errorf("Attempts of the woken Acquire(%q) = %d, want at most 4", name, n)
	}
}

// testCancelledWatch: a waiter whose context ends returns at once, and
// leaves no session waiting in GET_LOCK on the server.
func testCancelledWatch(t *testing.T, db *sql.DB) {
	name := testkit.UniqueName(t, "sqllock")
	holder := newLocker(t, db, sqllock.MySQL, nil)
	waiter := newLocker(t, db, sqllock.MySQL, nil)
	before := userLockWaits(t, db)
	k, err := holder.Acquire(t.Context(), name, dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
	}
	defer k.Release(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, name)
		got <- err
	}()
	testkit.Eventually(t, "waiter blocked in GET_LOCK", func() bool { return userLockWaits(t, db) > before })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire(%q) = %v, want context.Canceled", name, err)
	}
	testkit.Eventually(t, "end of the cancelled GET_LOCK on the server", func() bool { return userLockWaits(t, db) <= before })
	// And it does not come back: the watch ended with the wait.
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		if n := userLockWaits(t, db); n > before {
			t.Fatalf("sessions waiting in GET_LOCK after the cancelled wait ended = %d, want %d", n, before)
		}
	}
}

// testSmallPool: Lockers on a pool too small to lend connections for
// wake-ups still hand a name on (by polling): they never take the
// connections their steps need.
func testSmallPool(t *testing.T, dsn string) {
	for _, limit := range []int{1, 2, 4} {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatalf("open %s: %v", dsn, err)
		}
		defer db.Close()
		db.SetMaxOpenConns(limit)
		name := testkit.UniqueName(t, "sqllock")
		var ls []*dlock.Locker
		for range 3 {
			ls = append(ls, newLocker(t, db, sqllock.MySQL, nil))
		}
		k, err := ls[0].Acquire(t.Context(), name)
		if err != nil {
			t.Fatalf("pool of %d: Acquire(%q) = %v, want a lock", limit, name, err)
		}
		got := make(chan error, len(ls)-1)
		var starts []*testkit.Starts
		for _, l := range ls[1:] {
			starts = append(starts, testkit.WatchStarts(l))
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				k, err := l.Acquire(ctx, name)
				if err == nil {
					err = k.Release(ctx)
				}
				got <- err
			}()
		}
		for _, s := range starts {
			s.WaitInAcquire(t, name, 1)
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("pool of %d: Release(%q) = %v, want nil", limit, name, err)
		}
		for range ls[1:] {
			if err := <-got; err != nil {
				t.Fatalf("pool of %d: waiting Acquire(%q) = %v, want a lock", limit, name, err)
			}
		}
	}
}

// testSharedBudget: Lockers made by separate New calls on one pool lend
// wake-ups at most the pool's budget of connections together (a quarter
// of its limit), not a budget each. The adversary is an application with
// several Lockers on one pool (one per table, say), all waiting: were the
// budget each Locker's, two Lockers on a pool of 8 would keep 4
// connections blocked in GET_LOCK, and four would keep all 8 from the
// renewals and releases.
func testSharedBudget(t *testing.T, db *sql.DB, dsn string) {
	const limit, budget, lockers = 8, 2, 2
	pool, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { pool.Close() }) // after the Lockers' Close
	pool.SetMaxOpenConns(limit)
	// Sessions of earlier tests' cancelled waits leave the server's
	// queue within GET_LOCK's timeout; count from none.
	testkit.Eventually(t, "GET_LOCK queue empty", func() bool { return userLockWaits(t, db) == 0 })

	holder := newLocker(t, db, sqllock.MySQL, nil) // on another pool
	names := make([]string, 2*budget)
	for i := range names {
		names[i] = testkit.UniqueName(t, "sqllock")
		k, err := holder.Acquire(t.Context(), names[i], dlock.WithTTL(time.Hour))
		if err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock", names[i], err)
		}
		defer k.Release(context.Background())
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, lockers*len(names))
	for range lockers {
		l := newLocker(t, pool, sqllock.MySQL, nil)
		for _, name := range names {
			go func() {
				_, err := l.Acquire(ctx, name)
				got <- err
			}()
		}
	}
	testkit.Eventually(t, "waiters blocked in GET_LOCK", func() bool { return userLockWaits(t, db) >= budget })
	for range 10 {
		if n := userLockWaits(t, db); n > budget {
			t.Fatalf("sessions waiting in GET_LOCK from %d Lockers on a pool of %d = %d, want at most %d", lockers, limit, n, budget)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	for range lockers * len(names) {
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
		}
	}
}
