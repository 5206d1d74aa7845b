package sqllock_test

import (
	"context"
	"database/sql"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/sqllock"
)

// testResumeProcesses: a worker process holds a lock; this process
// resumes it from its token and releases it while the worker still runs
// (the adversary: a second holder that believes it still holds the
// lock). The facts, in order: the Resume succeeds (so the worker's hold
// was live), the name is free after the Release, then the worker reports
// the loss at its next renewal, and its own Release gets ErrNotHeld.
func testResumeProcesses(t *testing.T, db *sql.DB, d sqllock.Dialect, store string) {
	const ttl = 3 * time.Second
	name := testkit.UniqueName(t, "sqllock")
	w, token := testworker.StartTokenHold(t, store, name, ttl, 0)
	l := newLocker(t, db, d, nil)
	k, err := l.Resume(t.Context(), token)
	if err != nil {
		t.Fatalf("Resume(the worker's token) = %v, want the lock", err)
	}
	resumed := time.Now()
	testkit.MustRelease(t, k)
	other := testkit.MustTryAcquire(t, newLocker(t, db, d, nil), name) // freed at once
	lostAt, cause := testworker.ExpectLost(t, w, 2*ttl)
	t.Logf("the worker saw the loss %v after the Resume (TTL %v): %s", lostAt.Sub(resumed), ttl, cause)
	if notHeld, err := testworker.ExpectRelease(t, w, ttl); !notHeld {
		t.Errorf("the worker's Release after the Resume = %s, want ErrNotHeld", err)
	}
	if err := other.Refresh(t.Context()); err != nil {
		t.Errorf("the new holder's Refresh after the old holder's Release = %v, want nil", err)
	}
	testkit.MustRelease(t, other)
}

// testLockDelayKilled: a worker process holding a lock with a lock-delay
// is killed with SIGKILL (the adversary: a holder that dies without a
// release): the name is taken again no earlier than its lease and delay
// after the worker's last renewal, which the row's expiry (read after the
// kill) bounds. A worker that releases cleanly frees it at once.
func testLockDelayKilled(t *testing.T, db *sql.DB, d sqllock.Dialect, store string) {
	const ttl, delay = 2 * time.Second, 3 * time.Second
	name := testkit.UniqueName(t, "sqllock")
	w, _ := testworker.StartTokenHold(t, store, name, ttl, delay)
	w.Kill(t)
	killed := time.Now()
	h := holder(t, db, d, "", name)
	if h == nil || h.Remaining <= delay {
		t.Fatalf("Inspect(%q) just after its holder was killed = %+v, want a lease of more than the delay %v left", name, h, delay)
	}
	l := newLocker(t, db, d, nil)
	ctx, cancel := context.WithTimeout(t.Context(), ttl+delay+sqllockBound+10*time.Second)
	defer cancel()
	k, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire(%q) after its holder was killed = %v, want a lock", name, err)
	}
	took := time.Since(killed)
	t.Logf("taken %v after the kill (TTL %v + delay %v = %v; %v of it left at the kill)", took, ttl, delay, ttl+delay, h.Remaining)
	if took < h.Remaining-5*time.Millisecond {
		t.Errorf("Acquire(%q) succeeded %v after the kill, before the %v of lease and delay left then", name, took, h.Remaining)
	}
	testkit.MustRelease(t, k)

	w, _ = testworker.StartTokenHold(t, store, name, ttl, time.Minute)
	testworker.StopTokenHold(t, w, 10*time.Second)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, l, name)) // a release frees at once, delay or not
}

// sqllockBound is the clock bound of the Lockers of these tests: a lease
// that ended less than it ago is taken only by a waiter that watched it
// for the holder's TTL and delay.
const sqllockBound = 10 * time.Second

// testMySQLResumeWakes: a waiter blocks on the named lock of a name that
// a worker process holds; this process resumes the hold and releases it.
// The adversary is the worker's session, which still holds the named lock
// (its Locker learns of the Resume only at its next renewal, a third of
// its minute's TTL later): the Resume ends that session's claim, so the
// waiter, which would otherwise sleep through the holder's whole lease
// (its retry bound is a minute too), takes the name long before either.
func testMySQLResumeWakes(t *testing.T, db *sql.DB, store string) {
	const ttl = time.Minute
	name := testkit.UniqueName(t, "sqllock")
	w, token := testworker.StartTokenHold(t, store, name, ttl, 0)
	waiter := newLocker(t, db, sqllock.MySQL, &sqllock.Options{MaxRetryInterval: ttl})
	before := userLockWaits(t, db)
	got := acquireAndRelease(t, waiter, name)
	testkit.Eventually(t, "waiter blocked in GET_LOCK", func() bool { return userLockWaits(t, db) > before })
	k, err := newLocker(t, db, sqllock.MySQL, nil).Resume(t.Context(), token)
	if err != nil {
		t.Fatalf("Resume(the worker's token) = %v, want the lock", err)
	}
	released := time.Now()
	testkit.MustRelease(t, k)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter's Acquire = %v", err)
		}
		t.Logf("the waiter took the name %v after the resumed hold's release", time.Since(released))
	case <-time.After(ttl / 6):
		t.Fatalf("the waiter did not take %q within %v of the resumed hold's release: still blocked on the old holder's named lock", name, ttl/6)
	}
	w.Signal(t, syscall.SIGTERM)
}

// acquireAndRelease acquires name with l, waiting, then releases it, in
// a goroutine; the channel receives the first error, or nil.
func acquireAndRelease(t *testing.T, l *dlock.Locker, name string) <-chan error {
	got := make(chan error, 1)
	go func() {
		k, err := l.Acquire(t.Context(), name)
		if err == nil {
			err = k.Release(context.Background())
		}
		got <- err
	}()
	return got
}
