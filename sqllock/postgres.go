package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// PostgreSQL's now() is the start of the transaction; clock_timestamp() is
// the time of the call, which is what a lease must be measured against.
func postgresQueries(table string, bound time.Duration) *queries {
	t, h := `"`+table+`"`, `"`+holdersTable(table)+`"`
	liveAfter := `(clock_timestamp() - ` + strconv.FormatInt(micros(bound), 10) + ` * interval '1 microsecond')`
	// stamp is a row's state for driver.Result.Stamp: owner, token and
	// expiry in µs, which every renewal, change of holder and release
	// changes.
	stamp := func(p string) string {
		return p + `owner || '|' || ` + p + `fence || '|' || (extract(epoch FROM ` + p + `expires) * 1000000)::bigint`
	}
	r := strings.NewReplacer("{t}", t, "{h}", h, "{table}", table, "{holders}", holdersTable(table),
		"{live_after}", liveAfter, "{stamp_l}", stamp("l."), "{stamp}", stamp(""),
		"{table_index}", derivedName(table, "_expires"), "{holders_index}", derivedName(table, holdersSuffix+"_expires"),
		"{now_us}", `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`,
		"{left_us}", `(extract(epoch FROM (expires - clock_timestamp())) * 1000000)::bigint`,
		"{intent_left_us}", `(extract(epoch FROM (intent_expires - clock_timestamp())) * 1000000)::bigint`)
	schema := []string{
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	name    text COLLATE "C" PRIMARY KEY,
	owner   text NOT NULL,
	fence   bigint NOT NULL,
	expires timestamptz NOT NULL,
	meta    text NOT NULL DEFAULT '',
	lim     integer NOT NULL DEFAULT 0,
	intent  text NOT NULL DEFAULT '',
	intent_expires timestamptz NOT NULL DEFAULT 'epoch',
	ttl     bigint NOT NULL DEFAULT 0,
	delay   bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 70)`),
		// Every step updates a row's expiry, and an update that changes
		// an indexed column cannot be HOT (written beside the old
		// version, without new index entries): with an index on expires,
		// 85 % of a soak's updates were not, the table's indexes grew
		// 5 -> 13 MB for 1,001 rows between autovacuums, and throughput
		// fell. So the lease table has no index but its key, and its
		// pages keep room for new versions (fillfactor); the minutely
		// cleanup scans it instead. A table made by an older dlock loses
		// the index here.
		r.Replace(`DROP INDEX IF EXISTS "{table_index}"`),
		r.Replace(`CREATE TABLE IF NOT EXISTS {h} (
	name    text COLLATE "C" NOT NULL,
	owner   text NOT NULL,
	fence   bigint NOT NULL,
	expires timestamptz NOT NULL,
	meta    text NOT NULL DEFAULT '',
	shared  boolean NOT NULL,
	lim     integer NOT NULL,
	delay   bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (name, owner)
)`),
		r.Replace(`CREATE INDEX IF NOT EXISTS "{holders_index}" ON {h} (expires)`),
	}
	columns := []column{
		{"lim", r.Replace(`ALTER TABLE {t} ADD COLUMN lim integer NOT NULL DEFAULT 0`)},
		{"intent", r.Replace(`ALTER TABLE {t} ADD COLUMN intent text NOT NULL DEFAULT ''`)},
		{"intent_expires", r.Replace(`ALTER TABLE {t} ADD COLUMN intent_expires timestamptz NOT NULL DEFAULT 'epoch'`)},
		{"ttl", r.Replace(`ALTER TABLE {t} ADD COLUMN ttl bigint NOT NULL DEFAULT 0`)},
		{"delay", r.Replace(`ALTER TABLE {t} ADD COLUMN delay bigint NOT NULL DEFAULT 0`)},
	}
	holderColumns := []column{
		{"delay", r.Replace(`ALTER TABLE {h} ADD COLUMN delay bigint NOT NULL DEFAULT 0`)},
	}
	// One statement: the upsert, and if it took nothing, the holder's
	// lease left, its stamp (for an exclusive holder) and its TTL. A row is taken
	// when free, when its lease ended more than the clock bound ago, or
	// when its stamp is the takeover ($5).
	acquire := r.Replace(`WITH taken AS (
	INSERT INTO {t} AS l (name, owner, fence, expires, meta, ttl, delay)
	VALUES ($1, $2, {now_us}, clock_timestamp() + $3::bigint * interval '1 microsecond', $4, $3, $6)
	ON CONFLICT (name) DO UPDATE SET
		fence = CASE WHEN l.owner = excluded.owner THEN l.fence ELSE GREATEST(excluded.fence, l.fence + 1) END,
		owner = excluded.owner,
		expires = excluded.expires,
		meta = excluded.meta,
		ttl = excluded.ttl,
		delay = excluded.delay,
		intent = CASE WHEN l.intent = excluded.owner THEN '' ELSE l.intent END
	WHERE l.owner = excluded.owner OR l.owner = '' OR l.expires <= {live_after}
		OR ($5 <> '' AND l.owner <> '*' AND {stamp_l} = $5)
	RETURNING fence
)
SELECT true, fence, 0::bigint, false, 0, '', 0::bigint FROM taken
UNION ALL
SELECT false, 0::bigint, {left_us}, owner = '*', lim,
	CASE WHEN owner <> '*' THEN {stamp} ELSE '' END, ttl
FROM {t} WHERE name = $1 AND owner <> '' AND NOT EXISTS (SELECT FROM taken)`)
	// Release notifies in the same statement, so the notification is sent
	// exactly when the release commits.
	release := r.Replace(`WITH freed AS (
	UPDATE {t} SET owner = '', expires = clock_timestamp()
	WHERE name = $1 AND owner = $2 AND expires > {live_after}
	RETURNING name
)
SELECT pg_notify($3, name)::text FROM freed`)
	force := r.Replace(`WITH freed AS (
	UPDATE {t} SET owner = '', expires = clock_timestamp(), intent = ''
	WHERE name = $1 AND owner <> '' AND expires > {live_after}
	RETURNING name
)
SELECT pg_notify($2, name)::text FROM freed`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE name IN (
	SELECT name FROM {t} WHERE expires < clock_timestamp() - $1::bigint * interval '1 microsecond'
		AND intent_expires < clock_timestamp() - $2::bigint * interval '1 microsecond'
	LIMIT $3 FOR UPDATE SKIP LOCKED)`)
	cleanupHolders := r.Replace(`DELETE FROM {h} WHERE (name, owner) IN (
	SELECT name, owner FROM {h} WHERE expires < clock_timestamp() - $1::bigint * interval '1 microsecond'
	LIMIT $2 FOR UPDATE SKIP LOCKED)`)
	holders := r.Replace(`SELECT name, owner, fence, {left_us}, meta, false, 0, delay FROM {t} WHERE owner NOT IN ('', '*') AND expires > {live_after}
UNION ALL
SELECT name, owner, fence, {left_us}, meta, shared, lim, delay FROM {h} WHERE expires > {live_after}
ORDER BY 1, 3`)
	multi := newMultiSQL(t, h, clock{
		now:       `clock_timestamp()`,
		liveAfter: liveAfter,
		plus:      `clock_timestamp() + ?::bigint * interval '1 microsecond'`,
		left: func(c string) string {
			return `(extract(epoch FROM (` + c + ` - clock_timestamp())) * 1000000)::bigint`
		},
	}, true)
	// ON CONFLICT DO UPDATE locks the row (its latest version) until the
	// transaction ends, and creates it if it is missing.
	multi.lock = []string{r.Replace(`INSERT INTO {t} AS l (name, owner, fence, expires) VALUES ($1, '', 0, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET owner = l.owner
RETURNING {now_us}, owner, fence, {left_us}, lim, intent, {intent_left_us}`)}
	multi.notify = `SELECT pg_notify($1, $2)`
	multi.refresh.returning = true
	// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's
	// catalog; an advisory lock on the table's name serializes them.
	lockKey := `SELECT pg_advisory_xact_lock(hashtext($1))`

	return &queries{
		migrate: func(ctx context.Context, db *sql.DB) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("create table %s: %w", table, err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, lockKey, "dlock:"+table); err != nil {
				return fmt.Errorf("create table %s: %w", table, err)
			}
			for _, s := range schema {
				if _, err := tx.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("create table %s: %w", table, err)
				}
			}
			const columnsOf = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`
			if err := addColumns(ctx, tx, columnsOf, table, columns); err != nil {
				return err
			}
			if err := addColumns(ctx, tx, columnsOf, holdersTable(table), holderColumns); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("create table %s: %w", table, err)
			}
			return nil
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (outcome, error) {
			rows, err := db.QueryContext(ctx, acquire, l.Name, l.Owner, leaseUs(l), l.Metadata, l.Takeover, micros(l.Delay))
			if err != nil {
				return outcome{}, err
			}
			defer rows.Close()
			var o outcome
			for rows.Next() {
				var (
					fence, us, ttl int64
					stamp          string
				)
				if err := rows.Scan(&o.Acquired, &fence, &us, &o.multi, &o.lim, &stamp, &ttl); err != nil {
					return outcome{}, err
				}
				if o.Acquired {
					o.Fence = uint64(fence)
					continue
				}
				o.Result = notTaken(us, o.multi, stamp, ttl, bound)
			}
			if err := rows.Err(); err != nil {
				return outcome{}, err
			}
			return o, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]uint64, error) {
			var b strings.Builder
			args := make([]any, 0, 5*len(ls))
			b.WriteString(r.Replace(`UPDATE {t} AS l SET expires = clock_timestamp() + v.ttl * interval '1 microsecond', ttl = v.ttl, delay = v.delay FROM (VALUES `))
			for i, l := range ls {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("($" + strconv.Itoa(5*i+1) + "::text, $" + strconv.Itoa(5*i+2) + "::text, $" + strconv.Itoa(5*i+3) +
					"::bigint, $" + strconv.Itoa(5*i+4) + "::bigint, $" + strconv.Itoa(5*i+5) + "::bigint)")
				args = append(args, l.Name, l.Owner, leaseUs(l), int64(l.Fence), micros(l.Delay))
			}
			// A lease in doubt (ended less than the clock bound ago) is
			// still its holder's, so it is extended too.
			b.WriteString(r.Replace(`) AS v (name, owner, ttl, fence, delay) WHERE l.name = v.name AND l.owner = v.owner AND (v.fence = 0 OR l.fence = v.fence)
	AND l.expires > {live_after} RETURNING l.name, l.owner, l.fence`))
			rows, err := db.QueryContext(ctx, b.String(), args...)
			if err != nil {
				return nil, err
			}
			return heldSet(rows)
		},
		release: func(ctx context.Context, db querier, name, owner string) (bool, error) {
			return anyRow(db.QueryContext(ctx, release, name, owner, table))
		},
		forceRelease: func(ctx context.Context, db querier, name string) (bool, error) {
			return anyRow(db.QueryContext(ctx, force, name, table))
		},
		cleanupSQL:        cleanup,
		cleanupHoldersSQL: cleanupHolders,
		holdersSQL:        holders,
		multi:             multi,
	}
}

// anyRow reports whether rows has at least one row, and closes it.
func anyRow(rows *sql.Rows, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		found = true
	}
	return found, rows.Err()
}
