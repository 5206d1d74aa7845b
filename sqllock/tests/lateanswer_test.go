package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
)

// lateSleep is how long the server runs on with a statement of
// testLateAnswer's waiter after the statement began, whatever cancel
// request comes: well below the second an Acquire waits for the answer
// of a statement it gave up (driver.QueueLeaveTimeout).
const lateSleep = 300 * time.Millisecond

// testLateAnswer checks dlocktest's rule that a wait whose context ends
// leaves nothing behind, against the adversary that made
// AcquireHonoursContext fail under load: the server runs a statement of
// the waiter to its end after the waiter gave up. PostgreSQL ignores a
// cancel request that reaches a session before it has read the
// statement, and then runs the statement in full; here a trigger stands
// in for that, sleeping lateSleep and ignoring cancel requests, on the
// statements of the waiter's pool only (its application_name). If
// Acquire returned at once, the statement would take the name for an
// owner that gave up, after the holder's release, and the next
// TryAcquire would fail until the core's late release (a second later).
//
//   - exclusive: a holds the name; b's wait is cancelled while its
//     upsert runs (before its row is looked at: a BEFORE INSERT
//     trigger), a releases as soon as b's Acquire returns, and c's
//     TryAcquire must get the name.
//   - shared: b's shared Acquire of a free name is cancelled while its
//     transaction commits (a deferred trigger), and c's exclusive
//     TryAcquire must get the name. This one the core's release of an
//     abandoned acquisition also meets, since that release waits for
//     the row the late commit locks; it checks that Acquire frees a
//     hold that the server granted after the caller gave up.
func testLateAnswer(t *testing.T, p *testserver.Postgres, db *sql.DB) {
	const table = "late_answer"
	if err := sqllock.Migrate(t.Context(), db, sqllock.PostgreSQL, table); err != nil {
		t.Fatalf("Migrate(%q) = %v", table, err)
	}
	mustExec(t, db, `CREATE OR REPLACE FUNCTION late_answer_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	until timestamptz := clock_timestamp() + interval '`+lateSleep.String()+`';
BEGIN
	IF current_setting('application_name') = TG_ARGV[0] THEN
		WHILE clock_timestamp() < until LOOP
			BEGIN
				PERFORM pg_sleep(extract(epoch FROM until - clock_timestamp()));
			EXCEPTION WHEN query_canceled THEN
				NULL; -- the statement runs on, as one the server read after the cancel request
			END;
		END LOOP;
	END IF;
	RETURN NEW;
END $$`)
	mustExec(t, db, `CREATE TRIGGER late_answer_upsert BEFORE INSERT ON late_answer
	FOR EACH ROW EXECUTE FUNCTION late_answer_sleep('dlock_late_upsert')`)
	mustExec(t, db, `CREATE CONSTRAINT TRIGGER late_answer_commit AFTER INSERT ON late_answer_holders
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION late_answer_sleep('dlock_late_commit')`)

	opts := &sqllock.Options{Table: table}
	for _, mode := range []struct {
		name, app string
		holder    bool
		opts      []dlock.Option
	}{
		{"exclusive", "dlock_late_upsert", true, nil},
		{"shared", "dlock_late_commit", false, []dlock.Option{dlock.Shared()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			late, err := sql.Open("pgx", p.DSN()+"&application_name="+mode.app)
			if err != nil {
				t.Fatalf("open the waiter's pool: %v", err)
			}
			defer late.Close()
			a, b, c := newLocker(t, db, sqllock.PostgreSQL, opts), newLocker(t, late, sqllock.PostgreSQL, opts), newLocker(t, db, sqllock.PostgreSQL, opts)
			name := testkit.UniqueName(t, "late-answer")
			var k *dlock.Lock
			if mode.holder {
				k = testkit.MustTryAcquire(t, a, name)
			}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got := testkit.AcquireAsync(ctx, b, name, mode.opts...)
			testkit.Eventually(t, "the waiter's statement running on at the server", func() bool {
				return sleeping(t, db, mode.app) > 0
			})
			cancel()
			cancelled := time.Now()
			r := <-got
			if r.Lock != nil {
				r.Lock.Release(t.Context())
			}
			if !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("cancelled Acquire(%q) = %v, want context.Canceled", name, r.Err)
			}
			t.Logf("cancelled Acquire returned %v after cancel", r.At.Sub(cancelled))
			if k != nil {
				testkit.MustRelease(t, k)
			}
			testkit.Eventually(t, "the waiter's statement ended at the server", func() bool {
				return active(t, db, mode.app) == 0
			})
			k3, err := c.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("TryAcquire(%q) after the cancelled Acquire returned and the holder released = %v, want a lock: the server ran the cancelled waiter's statement after its Acquire returned, and it took the name", name, err)
			}
			testkit.MustRelease(t, k3)
		})
	}
}

// sleeping returns how many sessions of application app wait in the
// trigger's pg_sleep.
func sleeping(t *testing.T, db *sql.DB, app string) int {
	return sessions(t, db, app, "wait_event = 'PgSleep'")
}

// active returns how many sessions of application app run a statement.
func active(t *testing.T, db *sql.DB, app string) int {
	return sessions(t, db, app, "state = 'active'")
}

// sessions returns how many sessions of application app pg_stat_activity
// shows with cond true.
func sessions(t *testing.T, db *sql.DB, app, cond string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND `+cond, app).Scan(&n); err != nil {
		t.Fatalf("count the sessions of %s with %s: %v", app, cond, err)
	}
	return n
}
