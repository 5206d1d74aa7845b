package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// Steps of the database's wall clock (issue 23, finding 3): leases are
// measured by it, so a forward step must not end a lease under its
// holder, and a step back must not make a token go down.

// clockStepTTL is the lease of the clock-step tests.
const clockStepTTL = 1500 * time.Millisecond

// TestClockStep runs the clock-step tests on PostgreSQL and MariaDB
// servers whose wall clock the test steps. The tests share one clock and
// run in turn; each leaves the offset as it found it.
//
// CrashedHolderTakenOver and FreshLockerInDoubt need the core's side of
// the observation rule (the waiting loop calling Acquire with
// driver.Lease.Takeover once it saw a Stamp unchanged for StampTTL):
// without it a waiter takes a crashed holder's name only ClockBound after
// the lease ended, and they fail.
func TestClockStep(t *testing.T) {
	c := testserver.NewClock(t)
	p := testserver.StartPostgresClock(t, c)
	m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{Clock: c})
	for _, s := range []struct {
		name string
		db   *sql.DB
		d    sqllock.Dialect
	}{{"Postgres", p.DB(t), sqllock.PostgreSQL}, {"MariaDB", m.DB(t), sqllock.MySQL}} {
		t.Run(s.name+"/Forward", func(t *testing.T) { testStepForward(t, c, s.db, s.d) })
		t.Run(s.name+"/Back", func(t *testing.T) { testStepBack(t, c, s.db, s.d) })
		t.Run(s.name+"/CrashedHolderTakenOver", func(t *testing.T) { testCrashedHolderTakenOver(t, s.db, s.d) })
		t.Run(s.name+"/FreshLockerInDoubt", func(t *testing.T) { testFreshLockerInDoubt(t, s.db, s.d) })
	}
}

// waited is the outcome of a waiter's Acquire, with whether the holder's
// Done was closed when it returned.
type waited struct {
	k          *dlock.Lock
	err        error
	holderDone bool
	took       time.Duration
}

// waitAsync acquires name on l in a goroutine; holder is the lock that
// must have lost its Done before the waiter gets the name (nil for none).
func waitAsync(t *testing.T, l *dlock.Locker, name string, holder *dlock.Lock) <-chan waited {
	t.Helper()
	ch := make(chan waited, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		start := time.Now()
		k, err := l.Acquire(ctx, name, dlock.WithTTL(clockStepTTL))
		w := waited{k: k, err: err, took: time.Since(start)}
		if holder != nil {
			w.holderDone = testkit.IsClosed(holder.Done())
		}
		ch <- w
	}()
	return ch
}

// wantAfter checks a waiter's outcome: a lock, taken once the holder's
// Done was closed, with a token above the holder's.
func wantAfter(t *testing.T, name string, w waited, holder *dlock.Lock) {
	t.Helper()
	if w.err != nil {
		t.Fatalf("waiter's Acquire(%q) = %v, want a lock", name, w.err)
	}
	if !w.holderDone {
		t.Errorf("waiter's Acquire(%q) returned token %d while the holder's Done (token %d) was open: two holders at once", name, w.k.Fence(), holder.Fence())
	}
	if w.k.Fence() <= holder.Fence() {
		t.Errorf("waiter's Fence() = %d, want above the holder's %d", w.k.Fence(), holder.Fence())
	}
}

// testStepForward: a holder renewing a 1.5 s lease keeps it across a +5 s
// step of the database's clock, no other Locker gets the name while its
// Done is open (neither a fresh TryAcquire just after the step nor a
// waiter), and the waiter gets it after the holder releases.
func testStepForward(t *testing.T, c *testserver.Clock, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	name := testkit.UniqueName(t, "sqllock")
	k, err := newLocker(t, db, d, nil).TryAcquire(ctx, name, dlock.WithTTL(clockStepTTL))
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	ch := waitAsync(t, newLocker(t, db, d, nil), name, k)
	time.Sleep(300 * time.Millisecond) // let the waiter try once before the step
	c.Step(5 * time.Second)
	defer c.Step(-5 * time.Second)

	probe, err := newLocker(t, db, d, nil).TryAcquire(ctx, name, dlock.WithTTL(clockStepTTL))
	switch {
	case err == nil:
		open := !testkit.IsClosed(k.Done())
		probe.Release(ctx)
		if open {
			t.Errorf("TryAcquire(%q) just after a +5s step = token %d while the holder's Done (token %d) was open: two holders at once", name, probe.Fence(), k.Fence())
		}
	case !errors.Is(err, dlock.ErrNotAcquired):
		t.Fatalf("TryAcquire(%q) just after a +5s step = %v, want ErrNotAcquired", name, err)
	}

	// Hold for three leases: the holder renews every TTL/10.
	select {
	case <-k.Done():
		t.Errorf("holder of %q lost its lock after a +5s step of the database's clock: %v", name, context.Cause(k.Context()))
	case w := <-ch:
		wantAfter(t, name, w, k)
		if w.k != nil {
			w.k.Release(ctx)
		}
		return
	case <-time.After(3 * clockStepTTL):
	}
	if err := k.Release(ctx); err != nil {
		t.Errorf("holder's Release(%q) after a +5s step = %v, want nil", name, err)
	}
	w := <-ch
	wantAfter(t, name, w, k)
	if w.k != nil {
		w.k.Release(ctx)
	}
}

// testStepBack: across a -5 s step of the database's clock a renewing
// holder keeps its lock, the waiter gets it after the release, and the
// tokens of the acquisitions that follow, before and after the clock
// steps forward again, keep increasing.
func testStepBack(t *testing.T, c *testserver.Clock, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	name := testkit.UniqueName(t, "sqllock")
	l := newLocker(t, db, d, nil)
	k, err := l.TryAcquire(ctx, name, dlock.WithTTL(clockStepTTL))
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	c.Step(-5 * time.Second)
	stepped := true
	defer func() {
		if stepped {
			c.Step(5 * time.Second)
		}
	}()
	ch := waitAsync(t, newLocker(t, db, d, nil), name, k)
	select {
	case <-k.Done():
		t.Errorf("holder of %q lost its lock after a -5s step: %v", name, context.Cause(k.Context()))
	case w := <-ch:
		wantAfter(t, name, w, k)
		t.FailNow()
	case <-time.After(2 * clockStepTTL):
	}
	k.Release(ctx)
	w := <-ch
	wantAfter(t, name, w, k)
	last := w.k.Fence()
	w.k.Release(ctx)
	next := func(when string) {
		t.Helper()
		k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(clockStepTTL))
		defer k.Release(ctx)
		if k.Fence() <= last {
			t.Errorf("Fence() %s = %d, want above the previous %d", when, k.Fence(), last)
		}
		last = k.Fence()
	}
	next("after a -5s step")
	c.Step(5 * time.Second)
	stepped = false
	next("after the clock stepped forward again")
	// A step back after a lease ended: the next token is still above.
	c.Step(-5 * time.Second)
	stepped = true
	next("after a second -5s step")
}

// testCrashedHolderTakenOver: a holder that stops renewing without
// releasing is taken over by a waiting Locker about one TTL after its
// lease ended (the waiter saw the row in doubt unchanged for the holder's
// TTL), long before the clock bound. Needs the core's observation rule.
func testCrashedHolderTakenOver(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	name := testkit.UniqueName(t, "sqllock")
	start := time.Now()
	k, err := newLocker(t, db, d, nil).TryAcquire(ctx, name, dlock.WithTTL(clockStepTTL), dlock.WithoutRenewal())
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	w := <-waitAsync(t, newLocker(t, db, d, nil), name, k)
	took := time.Since(start)
	wantAfter(t, name, w, k)
	if w.k != nil {
		w.k.Release(ctx)
	}
	t.Logf("a waiter took over %v after the crashed holder's acquisition (lease %v, clock bound %v)", took, clockStepTTL, driver.DefaultClockBound)
	if took < clockStepTTL {
		t.Errorf("waiter took %q %v after the holder's acquisition, before its lease of %v ended", name, took, clockStepTTL)
	}
	if limit := 2*clockStepTTL + 3*time.Second; took > limit {
		t.Errorf("waiter took %q %v after the crashed holder's acquisition, want within %v (two leases and slack), not after the clock bound %v", name, took, limit, driver.DefaultClockBound)
	}
}

// testFreshLockerInDoubt: a Locker that arrives while a crashed holder's
// row is in doubt gets the name about one TTL after arriving (never
// sooner), long before the clock bound. Needs the core's observation
// rule.
func testFreshLockerInDoubt(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	name := testkit.UniqueName(t, "sqllock")
	k, err := newLocker(t, db, d, nil).TryAcquire(ctx, name, dlock.WithTTL(clockStepTTL), dlock.WithoutRenewal())
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	<-k.Done()
	time.Sleep(clockStepTTL) // the lease ended by the database's clock too
	w := <-waitAsync(t, newLocker(t, db, d, nil), name, k)
	wantAfter(t, name, w, k)
	if w.k != nil {
		w.k.Release(ctx)
	}
	t.Logf("a fresh Locker arriving in the doubt window took the name %v after arriving (lease %v)", w.took, clockStepTTL)
	if w.took < clockStepTTL {
		t.Errorf("fresh Locker took %q %v after arriving, before seeing the row unchanged for the holder's TTL %v", name, w.took, clockStepTTL)
	}
	if limit := clockStepTTL + 3*time.Second; w.took > limit {
		t.Errorf("fresh Locker took %q %v after arriving, want within %v (one lease and slack), not at the clock bound %v", name, w.took, limit, driver.DefaultClockBound)
	}
}

// setExpired moves the lease of name's row in table (the lease table, or
// its holders table with holders set) to have ended ago by the database's
// clock, as a forward step of that clock would; with zeroTTL it also
// forgets the holder's TTL, as on a row written by an older dlock.
func setExpired(t *testing.T, db *sql.DB, d sqllock.Dialect, name string, ago time.Duration, holders bool) {
	t.Helper()
	table := sqllock.DefaultTable
	if holders {
		table += "_holders"
	}
	q := map[sqllock.Dialect]string{
		sqllock.PostgreSQL: "UPDATE " + table + " SET expires = clock_timestamp() - $2 * interval '1 microsecond' WHERE name = $1",
		sqllock.SQLite:     "UPDATE " + table + " SET expires = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) - ?2 WHERE name = ?1",
	}[d]
	args := []any{name, ago.Microseconds()}
	if d == sqllock.MySQL { // no numbered parameters
		q = "UPDATE " + table + " SET expires = TIMESTAMPADD(MICROSECOND, -?, UTC_TIMESTAMP(6)) WHERE name = ?"
		args = []any{ago.Microseconds(), name}
	}
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// testDoubtRule checks the driver's side of the clock bound on rows
// written by hand, on every dialect (SQLite's clock cannot be stepped
// per process): a lease that ended less than the bound ago is not taken
// but described by a Stamp, which a Takeover must match exactly; renewals
// in doubt are the holder's and change the stamp; a refresh checks the
// token; a row without a known TTL gets no stamp; a lease that ended
// longer ago is free; a shared holder in doubt keeps writers out, with no
// stamp.
func testDoubtRule(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	l, drv, err := testhook.New(db, d.String(), false)
	if err != nil {
		t.Fatalf("testhook.New(%v) = %v", d, err)
	}
	defer l.Close()
	const ttl = 1500 * time.Millisecond
	name := testkit.UniqueName(t, "sqllock")
	a := driver.Lease{Name: name, Owner: "holderAAAAAAAAAAAAAAAAA:1", TTL: ttl}
	b := driver.Lease{Name: name, Owner: "takerBBBBBBBBBBBBBBBBBB:1", TTL: ttl}
	acquire := func(l driver.Lease, takeover string) driver.Result {
		t.Helper()
		l.Takeover = takeover
		res, err := drv.Acquire(ctx, l)
		if err != nil {
			t.Fatalf("Acquire(%q, owner %s, takeover %q) = %v", l.Name, l.Owner, takeover, err)
		}
		return res
	}
	refresh := func(l driver.Lease, fence uint64) error {
		t.Helper()
		l.Fence = fence
		return drv.Refresh(ctx, []driver.Lease{l})[0]
	}
	res := acquire(a, "")
	if !res.Acquired {
		t.Fatalf("Acquire(%q) on a free name = %+v, want acquired", name, res)
	}
	fa := res.Fence
	if err := refresh(a, fa+1); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh with token %d of a lease holding %d = %v, want ErrNotHeld", fa+1, fa, err)
	}
	if err := refresh(a, fa); err != nil {
		t.Errorf("Refresh with its own token = %v, want nil", err)
	}
	live := acquire(b, "")
	if live.Acquired || live.Stamp == "" || live.StampTTL != ttl {
		t.Errorf("Acquire(%q) of a live lease = %+v, want not acquired, its holder's Stamp, StampTTL %v", name, live, ttl)
	}

	setExpired(t, db, d, name, time.Second, false)
	res = acquire(b, "")
	if res.Acquired || res.Stamp == "" || res.StampTTL != ttl {
		t.Fatalf("Acquire(%q) of a lease that ended 1s ago = %+v, want not acquired, a Stamp, StampTTL %v", name, res, ttl)
	}
	if bound := driver.DefaultClockBound; res.Remaining <= 0 || res.Remaining > bound-time.Second+time.Second/2 {
		t.Errorf("Remaining of a lease that ended 1s ago = %v, want about %v (until it ended the clock bound ago)", res.Remaining, bound-time.Second)
	}
	stamp := res.Stamp
	if stamp == live.Stamp {
		t.Errorf("Stamp %q after the lease was rewritten = the live lease's, want another", stamp)
	}
	if res := acquire(b, ""); res.Stamp != stamp {
		t.Errorf("Stamp of an unchanged row = %q, then %q, want the same", stamp, res.Stamp)
	}
	if res := acquire(b, "someone:1|1|1"); res.Acquired {
		t.Fatalf("Acquire(%q) with a takeover of another state = %+v, want not acquired", name, res)
	}
	// The holder renews in doubt: still its lease, and a new stamp.
	if err := refresh(a, fa); err != nil {
		t.Errorf("Refresh of a lease in doubt by its holder = %v, want nil", err)
	}
	if res := acquire(b, stamp); res.Acquired || res.Stamp == "" || res.Stamp == stamp {
		t.Fatalf("Acquire(%q) with the stamp seen before a renewal = %+v, want not acquired, and the renewed lease's own stamp", name, res)
	}
	setExpired(t, db, d, name, time.Second, false)
	res = acquire(b, "")
	if res.Stamp == "" || res.Stamp == stamp {
		t.Fatalf("Stamp after a renewal = %q, want one, not the earlier %q", res.Stamp, stamp)
	}
	res = acquire(b, res.Stamp)
	if !res.Acquired || res.Fence <= fa {
		t.Fatalf("Acquire(%q) with the row's current stamp = %+v, want acquired with a token above %d", name, res, fa)
	}
	fb := res.Fence
	if err := refresh(a, fa); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh by the holder taken over = %v, want ErrNotHeld", err)
	}
	if err := drv.Release(ctx, a); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release by the holder taken over = %v, want ErrNotHeld", err)
	}

	// A row of an older dlock (TTL unknown) in doubt: no stamp, so no
	// takeover; it is free once it ended the bound ago.
	c := driver.Lease{Name: name, Owner: "thirdCCCCCCCCCCCCCCCCCC:1", TTL: ttl}
	if _, err := db.ExecContext(ctx, "UPDATE "+sqllock.DefaultTable+" SET ttl = 0"+map[bool]string{true: " WHERE name = $1", false: " WHERE name = ?"}[d == sqllock.PostgreSQL], name); err != nil {
		t.Fatal(err)
	}
	setExpired(t, db, d, name, time.Second, false)
	if res := acquire(c, ""); res.Acquired || res.Stamp != "" || res.Remaining <= 0 {
		t.Errorf("Acquire(%q) of a row without a TTL in doubt = %+v, want not acquired, no stamp, a Remaining", name, res)
	}
	setExpired(t, db, d, name, driver.DefaultClockBound+time.Second, false)
	res = acquire(c, "")
	if !res.Acquired || res.Fence <= fb {
		t.Fatalf("Acquire(%q) of a lease that ended the clock bound ago = %+v, want acquired with a token above %d", name, res, fb)
	}
	if err := drv.Release(ctx, c); err != nil {
		t.Fatalf("Release = %v", err)
	}

	// A shared holder in doubt keeps a writer out, without a stamp, and
	// is still its holder's to renew and release.
	name = testkit.UniqueName(t, "sqllock")
	r := driver.Lease{Name: name, Owner: "readerRRRRRRRRRRRRRRRRR:1", TTL: ttl, Shared: true}
	res = acquire(r, "")
	if !res.Acquired {
		t.Fatalf("Acquire(%q) shared = %+v, want acquired", name, res)
	}
	if err := refresh(r, res.Fence+1); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of a reader with token %d, holding %d = %v, want ErrNotHeld", res.Fence+1, res.Fence, err)
	}
	setExpired(t, db, d, name, time.Second, false)
	setExpired(t, db, d, name, time.Second, true)
	w := driver.Lease{Name: name, Owner: "writerWWWWWWWWWWWWWWWWW:1", TTL: ttl}
	if res := acquire(w, ""); res.Acquired || res.Stamp != "" {
		t.Errorf("Acquire(%q) of a name whose reader is in doubt = %+v, want not acquired, no stamp", name, res)
	}
	if hs, err := drv.(driver.Inspector).Inspect(ctx, []string{name}); err != nil || len(hs) != 1 || hs[0].Remaining != 0 {
		t.Errorf("Inspect(%q) with a reader in doubt = %+v, %v, want it with Remaining 0", name, hs, err)
	}
	if err := refresh(r, res.Fence); err != nil {
		t.Errorf("Refresh of a reader in doubt with its token = %v, want nil", err)
	}
	if err := drv.Release(ctx, r); err != nil {
		t.Errorf("Release of a reader = %v, want nil", err)
	}
	if res := acquire(w, ""); !res.Acquired {
		t.Errorf("Acquire(%q) after the reader released = %+v, want acquired", name, res)
	}
	drv.Release(ctx, w)
}

// TestClockBoundOption: a negative Options.ClockBound is invalid, and
// clock_bound= sets it from a URL (a tiny bound frees a lease that ended
// at once, as before the bound).
func TestClockBoundOption(t *testing.T) {
	db := newSQLite(t)
	if _, err := sqllock.New(db, sqllock.SQLite, &sqllock.Options{ClockBound: -time.Second}); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("New with ClockBound -1s = %v, want ErrInvalid", err)
	}
	path := filepath.Join(t.TempDir(), "locks.db")
	for _, c := range []struct {
		query string
		taken bool // a lease that ended 1s ago is taken at once
	}{{"?clock_bound=1ms", true}, {"", false}} {
		l, err := dlock.Open(t.Context(), "sqlite://"+path+c.query)
		if err != nil {
			t.Fatalf("Open(%q) = %v", c.query, err)
		}
		defer l.Close()
		name := testkit.UniqueName(t, "sqllock")
		k := testkit.MustTryAcquire(t, l, name, dlock.WithoutRenewal())
		setExpired(t, openSQLite(t, path), sqllock.SQLite, name, time.Second, false)
		other, err := dlock.Open(t.Context(), "sqlite://"+path+c.query)
		if err != nil {
			t.Fatalf("Open(%q) = %v", c.query, err)
		}
		defer other.Close()
		k2, err := other.TryAcquire(t.Context(), name)
		if got := err == nil; got != c.taken {
			t.Errorf("TryAcquire(%q) of a lease that ended 1s ago with %q = %v, want taken %v", name, c.query, err, c.taken)
		}
		if k2 != nil {
			k2.Release(t.Context())
		}
		k.Release(t.Context())
	}
}
