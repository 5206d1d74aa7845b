package sqllock_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/sqllock"
)

// priorSchema is the schema of the release before lock-delays (the lease
// table with ttl, the holders table, neither with delay), with {t} for
// the lease table's name.
var priorSchema = map[sqllock.Dialect][]string{
	sqllock.MySQL: {
		"CREATE TABLE {t} (name VARBINARY(255) NOT NULL PRIMARY KEY, owner VARBINARY(255) NOT NULL, fence BIGINT NOT NULL, expires DATETIME(6) NOT NULL, " +
			"meta VARBINARY(1024) NOT NULL DEFAULT '', lim INT NOT NULL DEFAULT 0, intent VARBINARY(255) NOT NULL DEFAULT '', " +
			"intent_expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00', ttl BIGINT NOT NULL DEFAULT 0, KEY {t}_expires (expires)) ENGINE=InnoDB",
		"CREATE TABLE {t}_holders (name VARBINARY(255) NOT NULL, owner VARBINARY(255) NOT NULL, fence BIGINT NOT NULL, expires DATETIME(6) NOT NULL, " +
			"meta VARBINARY(1024) NOT NULL DEFAULT '', shared BOOLEAN NOT NULL, lim INT NOT NULL, PRIMARY KEY (name, owner), KEY {t}_holders_expires (expires)) ENGINE=InnoDB",
	},
	sqllock.PostgreSQL: {
		`CREATE TABLE {t} (name text COLLATE "C" PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL, expires timestamptz NOT NULL, meta text NOT NULL DEFAULT '',
	lim integer NOT NULL DEFAULT 0, intent text NOT NULL DEFAULT '', intent_expires timestamptz NOT NULL DEFAULT 'epoch', ttl bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE {t}_holders (name text COLLATE "C" NOT NULL, owner text NOT NULL, fence bigint NOT NULL, expires timestamptz NOT NULL,
	meta text NOT NULL DEFAULT '', shared boolean NOT NULL, lim integer NOT NULL, PRIMARY KEY (name, owner))`,
	},
	sqllock.SQLite: {
		`CREATE TABLE {t} (name TEXT NOT NULL PRIMARY KEY, owner TEXT NOT NULL, fence INTEGER NOT NULL, expires INTEGER NOT NULL, meta TEXT NOT NULL DEFAULT '',
	lim INTEGER NOT NULL DEFAULT 0, intent TEXT NOT NULL DEFAULT '', intent_expires INTEGER NOT NULL DEFAULT 0, ttl INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
		`CREATE TABLE {t}_holders (name TEXT NOT NULL, owner TEXT NOT NULL, fence INTEGER NOT NULL, expires INTEGER NOT NULL, meta TEXT NOT NULL DEFAULT '',
	shared INTEGER NOT NULL, lim INTEGER NOT NULL, PRIMARY KEY (name, owner)) WITHOUT ROWID`,
	},
}

// inAMinute is each dialect's expression of the database's clock a
// minute from now, in the type of expires.
var inAMinute = map[sqllock.Dialect]string{
	sqllock.MySQL:      "TIMESTAMPADD(SECOND, 60, UTC_TIMESTAMP(6))",
	sqllock.PostgreSQL: "clock_timestamp() + interval '60 seconds'",
	sqllock.SQLite:     "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) + 60000000",
}

// testUpgradePriorSchema: tables made by the release before lock-delays,
// holding an exclusive lock and a shared hold written by it (the
// adversary: a rolling upgrade, whose old processes still hold locks),
// gain the delay columns on a Locker's first use; both holds are kept,
// Inspect reports them undelayed, and lock-delays work.
func testUpgradePriorSchema(t *testing.T, db *sql.DB, d sqllock.Dialect) {
	ctx := t.Context()
	table := "prior_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r := strings.NewReplacer("{t}", table, "{soon}", inAMinute[d])
	for _, q := range priorSchema[d] {
		if _, err := db.ExecContext(ctx, r.Replace(q)); err != nil {
			t.Fatalf("create a prior table: %v", err)
		}
	}
	t.Cleanup(func() {
		db.ExecContext(context.Background(), "DROP TABLE "+table)
		db.ExecContext(context.Background(), "DROP TABLE "+table+"_holders")
	})
	excl, shared := testkit.UniqueName(t, "sqllock")+"/excl", testkit.UniqueName(t, "sqllock")+"/shared"
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO {t} (name, owner, fence, expires, meta, ttl) VALUES (?, 'someone:1', 42, {soon}, '', 60000000)", []any{excl}},
		{"INSERT INTO {t} (name, owner, fence, expires) VALUES (?, '*', 43, {soon})", []any{shared}},
		{"INSERT INTO {t}_holders VALUES (?, 'reader:1', 43, {soon}, '', TRUE, 0)", []any{shared}},
	} {
		if _, err := db.ExecContext(ctx, sqlText(d, r.Replace(q.sql)), q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	opts := &sqllock.Options{Table: table}
	l := newLocker(t, db, d, opts)
	testkit.WantNotAcquired(t, l, excl, "while the prior release's holder holds it")
	testkit.WantNotAcquired(t, l, shared, "while the prior release's reader holds it")
	hs, err := l.Inspect(ctx)
	if err != nil || len(hs) != 2 || hs[0].Delayed || hs[1].Delayed {
		t.Fatalf("Inspect() on the upgraded table = %+v, %v; want the two prior holds, not delayed", hs, err)
	}
	k := testkit.MustTryAcquire(t, l, testkit.UniqueName(t, "sqllock"), dlock.WithLockDelay(time.Minute), dlock.Shared())
	testkit.MustRelease(t, k)
	if err := sqllock.Migrate(ctx, db, d, table); err != nil {
		t.Fatalf("Migrate(%q) on an upgraded table = %v", table, err)
	}
}
