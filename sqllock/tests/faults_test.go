package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/sqllock"
)

// server is what the fault tests do to a database server.
type server interface {
	Pause(t testing.TB)
	Resume(t testing.TB)
	Restart(t testing.TB)
}

// testServerPaused holds a lock while the server is stopped with SIGSTOP
// (the adversary: a stalled database): Lock.Warnings must report renewals
// failing before Done closes, Done must close before the lease ends in
// the database, and new locks work after Resume.
//
// The check cannot race with the lease running out after Resume: it
// compares two readings of the database's clock, the row's expiry and
// the moment Done closed. The latter is the database's clock read after
// Resume minus the time elapsed (monotonic) since Done closed, counted up
// to when that reading was sent, so it is no earlier than the true
// moment. A renewal applied late, or a release, only moves the expiry of
// a lease that had not ended yet, so a later expiry still proves it.
func testServerPaused(t *testing.T, s server, db *sql.DB, d sqllock.Dialect) {
	const ttl = 4 * time.Second
	l := newLocker(t, db, d, nil)
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(ttl))
	ws := k.Warnings()

	s.Pause(t)
	defer s.Resume(t) // also after a failure: the server serves the other subtests
	paused := time.Now()
	warned, doneAt := testkit.WarnedBeforeDone(t, k, ws, ttl+5*time.Second)
	// A call on the paused server honours its context: the driver ends
	// it, since the core calls this driver in the caller's goroutine.
	const timeout = 300 * time.Millisecond
	tctx, tcancel := context.WithTimeout(t.Context(), timeout)
	started := time.Now()
	_, terr := newLocker(t, db, d, nil).TryAcquire(tctx, name+"-other")
	tcancel()
	if took := time.Since(started); !errors.Is(terr, context.DeadlineExceeded) || took > timeout+2*time.Second {
		t.Errorf("TryAcquire with a %v context on a paused server = %v after %v, want context.DeadlineExceeded promptly", timeout, terr, took)
	}
	s.Resume(t)
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Errorf("Cause(Context()) = %v, want ErrLost", cause)
	}
	t.Logf("the first warning came %v after Pause, %v before Done closed (TTL %v)", warned.Sub(paused), doneAt.Sub(warned), ttl)

	var r leaseRow
	testkit.Retry(t, "read the lease after Resume", func(ctx context.Context) (err error) {
		r, err = readLease(ctx, db, d, name)
		return err
	})
	doneDB := r.now - r.sent.Sub(doneAt) // no earlier than Done's closing, by the database's clock
	if r.fence != k.Fence() || r.expires <= doneDB {
		t.Fatalf("lease of %q: token %d, expiry %v after Done closed (database clock), want token %d and an expiry after it: the database lease ended before Done closed",
			name, r.fence, r.expires-doneDB, k.Fence())
	}
	t.Logf("Done closed %v after Pause, at least %v before the database lease ended", doneAt.Sub(paused), r.expires-doneDB)

	// New locks work after Resume, and the lost name is free once its
	// lease ends.
	wantWorksAfter(t, newLocker(t, db, d, nil), "Resume", k, ttl)
}

// leaseRow is a lock's row and the database's clock, read together.
type leaseRow struct {
	fence   uint64
	expires time.Duration // since 1970, by the database's clock
	now     time.Duration // the database's clock during the read
	sent    time.Time     // when the read was sent (monotonic)
}

// readLease reads name's row in the default table together with the
// database's clock, on a connection that is already open, so that the
// reading follows its sending by one round trip.
func readLease(ctx context.Context, db *sql.DB, d sqllock.Dialect, name string) (leaseRow, error) {
	q := map[sqllock.Dialect]string{
		sqllock.MySQL: "SELECT fence, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) FROM " +
			sqllock.DefaultTable + " WHERE name = ?",
		sqllock.PostgreSQL: "SELECT fence, (extract(epoch FROM expires) * 1000000)::bigint, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM " +
			sqllock.DefaultTable + " WHERE name = $1",
	}[d]
	var r leaseRow
	conn, err := db.Conn(ctx)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	if err := conn.PingContext(ctx); err != nil {
		return r, err
	}
	var expires, now int64
	r.sent = time.Now()
	err = conn.QueryRowContext(ctx, q, name).Scan(&r.fence, &expires, &now)
	r.expires, r.now = time.Duration(expires)*time.Microsecond, time.Duration(now)*time.Microsecond
	return r, err
}

// wantWorksAfter checks that other can take new locks within 10 s of a
// fault (what), and then k's name within its lease (ttl) and 10 s more,
// with a larger fencing token than k's.
func wantWorksAfter(t *testing.T, other *dlock.Locker, what string, k *dlock.Lock, ttl time.Duration) {
	t.Helper()
	testkit.Retry(t, "TryAcquire after "+what, func(ctx context.Context) error {
		k, err := other.TryAcquire(ctx, testkit.UniqueName(t, "sqllock"))
		if err == nil {
			k.Release(ctx)
		}
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), ttl+10*time.Second)
	defer cancel()
	k2, err := other.Acquire(ctx, k.Name())
	if err != nil {
		t.Fatalf("Acquire(%q) after %s = %v, want a lock", k.Name(), what, err)
	}
	if k2.Fence() <= k.Fence() {
		t.Errorf("Fence after %s = %d, want > %d", what, k2.Fence(), k.Fence())
	}
	k2.Release(t.Context())
}

// testServerRestarted holds a lock while the server is killed and started
// again on the same data: either Done closes, or the lock is still held
// consistently; new locks work afterwards.
func testServerRestarted(t *testing.T, s server, db *sql.DB, d sqllock.Dialect) {
	const ttl = 2 * time.Second
	l := newLocker(t, db, d, nil)
	other := newLocker(t, db, d, nil)
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(ttl))
	s.Restart(t)
	select {
	case <-k.Done():
		t.Logf("Done closed across the restart (%v)", context.Cause(k.Context()))
	case <-time.After(3 * ttl):
		// Renewed across the restart: still ours, and nobody else's.
		var h *dlock.LockInfo
		testkit.Retry(t, "Inspect after Restart", func(ctx context.Context) (err error) {
			h, err = inspect(ctx, other, name)
			return err
		})
		if testkit.IsClosed(k.Done()) {
			break
		}
		if h == nil || h.Fence != k.Fence() {
			t.Fatalf("lock %q open after a restart, but Inspect shows %+v, want token %d", name, h, k.Fence())
		}
		testkit.WantNotAcquired(t, other, name, "while another owner holds it")
		if err := k.Release(t.Context()); err != nil {
			t.Errorf("Release(%q) after a restart = %v, want nil", name, err)
		}
		t.Log("lock renewed across the restart")
	}
	wantWorksAfter(t, other, "Restart", k, ttl)
}

// testListenerReconnects checks that a waiter that relies on NOTIFY (its
// fallback is a minute) is still woken by a release after the server
// restarted under its listening connection.
func testListenerReconnects(t *testing.T, p *testserver.Postgres, db *sql.DB) {
	a := newLocker(t, db, sqllock.PostgreSQL, nil)
	b := newLocker(t, db, sqllock.PostgreSQL, &sqllock.Options{MaxRetryInterval: time.Minute})
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(30*time.Second))
	got := make(chan *dlock.Lock, 1)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	starts := testkit.WatchStarts(b)
	wg.Go(func() {
		for ctx.Err() == nil {
			// An attempt that meets a connection broken by the restart
			// fails; wait again.
			if k, err := b.Acquire(ctx, name); err == nil {
				got <- k
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(got)
	})
	starts.WaitInAcquire(t, name, 1)
	testkit.Eventually(t, "b listening", func() bool { return tableListeners(t, db) >= 1 })
	p.Restart(t)
	testkit.Eventually(t, "b's listener reconnected", func() bool { return tableListeners(t, db) >= 1 })
	testkit.Retry(t, "Release after Restart", func(ctx context.Context) error { return k.Release(ctx) })
	released := time.Now()
	select {
	case k2 := <-got:
		if k2 == nil {
			t.Fatalf("waiting Acquire(%q) gave up", name)
		}
		t.Logf("woken %v after Release", time.Since(released))
		k2.Release(t.Context())
	case <-time.After(10 * time.Second):
		t.Fatalf("waiter on %q not woken 10s after Release that followed a restart", name)
	}
}

// testKilledHolder kills -9 a process holding a lock: another process
// gets the lock once the lease ends in the database, not before.
func testKilledHolder(t *testing.T, db *sql.DB, d sqllock.Dialect, store string) {
	const ttl = 2 * time.Second
	name := testkit.UniqueName(t, "sqllock")
	w, fence := testworker.StartHolder(t, store, name, ttl)
	w.Kill(t)
	l := newLocker(t, db, d, nil)
	testkit.WantNotAcquired(t, l, name, "while another owner holds it")
	before := time.Now()
	h := holder(t, db, d, "", name)
	if h == nil || h.Fence != fence {
		t.Fatalf("Inspect(%q) after its holder was killed = %+v, want token %d", name, h, fence)
	}
	// Until the core observes the row in doubt (driver.Result.Stamp), the
	// name is free only the clock bound after the lease ended.
	ctx, cancel := context.WithTimeout(t.Context(), h.Remaining+driver.DefaultClockBound+10*time.Second)
	defer cancel()
	k, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire(%q) after its holder was killed = %v, want a lock", name, err)
	}
	took := time.Since(before)
	t.Logf("taken %v after the kill; the lease had %v left", took, h.Remaining)
	if took < h.Remaining-5*time.Millisecond {
		t.Errorf("Acquire(%q) succeeded %v after the kill, before the lease's %v ran out", name, took, h.Remaining)
	}
	if k.Fence() <= fence {
		t.Errorf("Fence = %d, want > %d", k.Fence(), fence)
	}
	k.Release(t.Context())
}

// testProcesses runs worker processes that increment a counter file under
// one lock on a shared SQLite file: the count must be exact, and no worker
// may find another inside.
func testProcesses(t *testing.T, store string) {
	const procs, iterations = 4, 30
	name := testkit.UniqueName(t, "sqllock")
	counter := filepath.Join(t.TempDir(), "counter")
	var ws []*testworker.Process
	for range procs {
		ws = append(ws, testworker.Start(t, "count", store, name, counter, strconv.Itoa(iterations)))
	}
	for _, w := range ws {
		if err := w.Wait(t, time.Minute); err != nil {
			t.Errorf("worker: %v; stderr:\n%s", err, w.Stderr())
		}
	}
	data, err := os.ReadFile(counter)
	if err != nil {
		t.Fatalf("read counter: %v", err)
	}
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(procs*iterations) {
		t.Errorf("counter = %s, want %d", got, procs*iterations)
	}
}

// testListenerLostNotification breaks the listening connection of a waiter
// (its fallback is a minute) and releases before it can reconnect: the
// notification is lost, so the reconnection must wake the waiter.
func testListenerLostNotification(t *testing.T, db *sql.DB) {
	a := newLocker(t, db, sqllock.PostgreSQL, nil)
	b := newLocker(t, db, sqllock.PostgreSQL, &sqllock.Options{MaxRetryInterval: time.Minute})
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(30*time.Second))
	starts := testkit.WatchStarts(b)
	got := testkit.AcquireAsync(t.Context(), b, name)
	starts.WaitInAcquire(t, name, 1)
	testkit.Eventually(t, "b listening", func() bool { return tableListeners(t, db) == 1 })
	var n int
	err := db.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = 'LISTEN "`+sqllock.DefaultTable+`"' AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the listening backend: %d terminated, %v; want 1, nil", n, err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	released := time.Now()
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("waiting Acquire(%q) = %v, want a lock", name, r.Err)
		}
		t.Logf("woken %v after Release", time.Since(released))
		r.Lock.Release(t.Context())
	case <-time.After(10 * time.Second):
		t.Fatalf("waiter on %q not woken 10s after a Release its listener missed", name)
	}
}

// testPoolOfOne checks that waiting does not take a connection from the
// pool: with a pool of one connection, a waiter on PostgreSQL still gets
// the name when its holder releases.
func testPoolOfOne(t *testing.T, p *testserver.Postgres) {
	db := p.DB(t)
	db.SetMaxOpenConns(1)
	a := newLocker(t, db, sqllock.PostgreSQL, nil)
	b := newLocker(t, db, sqllock.PostgreSQL, nil)
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, a, name)
	// Not a LISTEN count: a query would need the pool's one connection.
	starts := testkit.WatchStarts(b)
	got := testkit.AcquireAsync(t.Context(), b, name)
	starts.WaitInAcquire(t, name, 1)
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("waiting Acquire(%q) = %v, want a lock", name, r.Err)
		}
		r.Lock.Release(t.Context())
	case <-time.After(10 * time.Second):
		t.Fatalf("waiter on %q not woken 10s after Release", name)
	}
}

// testListenerDownAtWatch starts two waits while the waiter's listening
// connection is down and cannot come back (its role may not log in) for
// longer than Watch waits for LISTEN. One name is released meanwhile, so
// its notification goes to nobody: the listener must wake its waiter once
// it has reconnected. The other is released after that: its waiter must
// be notified. Neither may have polled in between, which a trigger counts
// on the server: the waiter's poll interval is an hour and the holder's
// lease a minute, so only a wake-up can end a wait within the test.
func testListenerDownAtWatch(t *testing.T, p *testserver.Postgres, db *sql.DB) {
	const (
		role  = "dlock_waiter"
		table = "waiter_locks"
	)
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN SUPERUSER`,
		`CREATE TABLE waiter_attempts (name text NOT NULL)`,
		`CREATE FUNCTION waiter_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_user = '` + role + `' THEN INSERT INTO waiter_attempts VALUES (NEW.name); END IF;
			RETURN NEW;
		END $$`,
	} {
		mustExec(t, db, q)
	}
	if err := sqllock.Migrate(t.Context(), db, sqllock.PostgreSQL, table); err != nil {
		t.Fatalf("Migrate(%q) = %v", table, err)
	}
	mustExec(t, db, `CREATE TRIGGER waiter_attempt BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION waiter_attempt()`)
	wdb, err := sql.Open("pgx", strings.Replace(p.DSN(), "postgres@", role+"@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wdb.Close() })
	// Open the connections b's pool needs during the outage, when no new
	// one can log in: one per waiting Acquire.
	wdb.SetMaxIdleConns(4)
	var conns []*sql.Conn
	for range 3 {
		c, err := wdb.Conn(t.Context())
		if err == nil {
			err = c.PingContext(t.Context())
		}
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	a := newLocker(t, db, sqllock.PostgreSQL, &sqllock.Options{Table: table})
	b := newLocker(t, wdb, sqllock.PostgreSQL, &sqllock.Options{Table: table, MaxRetryInterval: time.Hour})
	waitListening := func(what string) {
		t.Helper()
		testkit.Retry(t, what, func(ctx context.Context) error {
			if n := listening(t, db, role); n != 1 {
				return fmt.Errorf("%d LISTEN backends of %s, want 1", n, role)
			}
			return nil
		})
	}

	// b's listener is up: b waits for a name a holds, then gets it.
	warm := testkit.UniqueName(t, "sqllock") + "/warm"
	k := testkit.MustTryAcquire(t, a, warm)
	got := testkit.AcquireAsync(t.Context(), b, warm)
	waitListening("LISTEN before the outage")
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", warm, err)
	}
	testkit.MustRelease(t, testkit.WantAcquired(t, got, warm, testkit.Patience).Lock)

	// b's listening connection ends and cannot be opened again.
	mustExec(t, db, `ALTER ROLE `+role+` NOLOGIN`)
	var n int
	err = db.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE usename = $1 AND query LIKE 'LISTEN%'`, role).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the listening backend: %d terminated, %v; want 1, nil", n, err)
	}
	testkit.Retry(t, "the end of the LISTEN backend", func(ctx context.Context) error {
		if n := listening(t, db, role); n != 0 {
			return fmt.Errorf("%d LISTEN backends of %s, want 0", n, role)
		}
		return nil
	})
	// Let b's listener see its connection closed, so that the waits below
	// begin during the outage. (If they began before, they would be woken
	// on reconnection like the waiters of ListenerLostNotification: this
	// test would pass without checking what it means to.)
	time.Sleep(200 * time.Millisecond)
	missed, notified := testkit.UniqueName(t, "sqllock")+"/missed", testkit.UniqueName(t, "sqllock")+"/notified"
	kMissed := testkit.MustTryAcquire(t, a, missed, dlock.WithTTL(time.Minute))
	kNotified := testkit.MustTryAcquire(t, a, notified, dlock.WithTTL(time.Minute))
	gotMissed, gotNotified := testkit.AcquireAsync(t.Context(), b, missed), testkit.AcquireAsync(t.Context(), b, notified)
	testkit.Retry(t, "the waiters' first attempts", func(ctx context.Context) error {
		if attempts(t, db, missed) == 0 || attempts(t, db, notified) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	time.Sleep(3 * time.Second) // longer than Watch waits for LISTEN
	if err := kMissed.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", missed, err)
	}
	mustExec(t, db, `ALTER ROLE `+role+` LOGIN`)
	back := time.Now()
	wantAcquired := func(name string, got <-chan testkit.Acquired, since time.Time, what string) {
		t.Helper()
		select {
		case r := <-got:
			if r.Err != nil {
				t.Fatalf("waiting Acquire(%q) = %v, want a lock", name, r.Err)
			}
			took := time.Since(since)
			r.Lock.Release(t.Context())
			n := attempts(t, db, name)
			t.Logf("%q acquired %v after %s, in %d attempts", name, took, what, n)
			// The first attempt, one after Watch, one when woken on
			// reconnection, one when notified, and one spare. A waiter
			// that polls makes 10 or more.
			if n > 5 {
				t.Errorf("attempts of the waiter on %q = %d, want at most 5: woken, not polling", name, n)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("waiter on %q not woken 20s after %s", name, what)
		}
	}
	wantAcquired(missed, gotMissed, back, "its listener could reconnect")
	waitListening("LISTEN after the outage")
	if err := kNotified.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", notified, err)
	}
	wantAcquired(notified, gotNotified, time.Now(), "its release")
}

// listening counts role's backends that LISTEN.
func listening(t *testing.T, db *sql.DB, role string) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND query LIKE 'LISTEN%'`, role).Scan(&n)
	if err != nil {
		t.Fatalf("count LISTEN backends: %v", err)
	}
	return n
}

// tableListeners counts the backends listening for releases on
// sqllock.DefaultTable, or -1 while the server does not answer.
func tableListeners(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE query = 'LISTEN "`+sqllock.DefaultTable+`"' AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		return -1
	}
	return n
}

// attempts counts the waiter's acquire attempts on name.
func attempts(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM waiter_attempts WHERE name = $1`, name).Scan(&n); err != nil {
		t.Fatalf("count attempts: %v", err)
	}
	return n
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
