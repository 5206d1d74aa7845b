package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// sqliteNow is the host's clock in microseconds since 1970, as SQLite
// sees it; 'now' is the same for the whole statement.
const sqliteNow = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`

func sqliteQueries(table string, bound time.Duration) *queries {
	t, h := `"`+table+`"`, `"`+holdersTable(table)+`"`
	boundUs := strconv.FormatInt(micros(bound), 10)
	liveAfter := `(` + sqliteNow + ` - ` + boundUs + `)`
	// stamp is a row's state for driver.Result.Stamp: owner, token and
	// expiry in µs, which every renewal, change of holder and release
	// changes.
	const stamp = `(owner || '|' || fence || '|' || expires)`
	r := strings.NewReplacer("{t}", t, "{h}", h, "{now}", sqliteNow, "{live_after}", liveAfter, "{bound}", boundUs, "{stamp}", stamp,
		"{table}", table, "{holders}", holdersTable(table),
		"{table_index}", derivedName(table, "_expires"), "{holders_index}", derivedName(table, holdersSuffix+"_expires"))
	schema := []string{
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	name    TEXT NOT NULL PRIMARY KEY,
	owner   TEXT NOT NULL,
	fence   INTEGER NOT NULL,
	expires INTEGER NOT NULL,
	meta    TEXT NOT NULL DEFAULT '',
	lim     INTEGER NOT NULL DEFAULT 0,
	intent  TEXT NOT NULL DEFAULT '',
	intent_expires INTEGER NOT NULL DEFAULT 0,
	ttl     INTEGER NOT NULL DEFAULT 0,
	delay   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID`),
		r.Replace(`CREATE INDEX IF NOT EXISTS "{table_index}" ON {t} (expires)`),
		r.Replace(`CREATE TABLE IF NOT EXISTS {h} (
	name    TEXT NOT NULL,
	owner   TEXT NOT NULL,
	fence   INTEGER NOT NULL,
	expires INTEGER NOT NULL,
	meta    TEXT NOT NULL DEFAULT '',
	shared  INTEGER NOT NULL,
	lim     INTEGER NOT NULL,
	delay   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (name, owner)
) WITHOUT ROWID`),
		r.Replace(`CREATE INDEX IF NOT EXISTS "{holders_index}" ON {h} (expires)`),
	}
	columns := []column{
		{"lim", r.Replace(`ALTER TABLE {t} ADD COLUMN lim INTEGER NOT NULL DEFAULT 0`)},
		{"intent", r.Replace(`ALTER TABLE {t} ADD COLUMN intent TEXT NOT NULL DEFAULT ''`)},
		{"intent_expires", r.Replace(`ALTER TABLE {t} ADD COLUMN intent_expires INTEGER NOT NULL DEFAULT 0`)},
		{"ttl", r.Replace(`ALTER TABLE {t} ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0`)},
		{"delay", r.Replace(`ALTER TABLE {t} ADD COLUMN delay INTEGER NOT NULL DEFAULT 0`)},
	}
	holderColumns := []column{
		{"delay", r.Replace(`ALTER TABLE {h} ADD COLUMN delay INTEGER NOT NULL DEFAULT 0`)},
	}
	// A row is taken when free, when its lease ended more than the clock
	// bound ago (excluded.fence is the clock), or when its stamp is the
	// takeover (?5).
	acquire := r.Replace(`INSERT INTO {t} (name, owner, fence, expires, meta, ttl, delay) VALUES (?1, ?2, {now}, {now} + ?3, ?4, ?3, ?6)
ON CONFLICT (name) DO UPDATE SET
	fence = CASE WHEN owner = excluded.owner THEN fence ELSE max(excluded.fence, fence + 1) END,
	owner = excluded.owner,
	expires = excluded.expires,
	meta = excluded.meta,
	ttl = excluded.ttl,
	delay = excluded.delay,
	intent = CASE WHEN intent = excluded.owner THEN '' ELSE intent END
WHERE owner = excluded.owner OR owner = '' OR expires <= excluded.fence - {bound}
	OR (?5 <> '' AND owner <> '*' AND {stamp} = ?5)
RETURNING fence`)
	remaining := r.Replace(`SELECT expires - {now}, owner = '*', lim,
	CASE WHEN owner <> '*' THEN {stamp} ELSE '' END, ttl
FROM {t} WHERE name = ?1 AND owner <> ''`)
	release := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ?1 AND owner = ?2 AND expires > {live_after}`)
	force := r.Replace(`UPDATE {t} SET owner = '', expires = {now}, intent = '' WHERE name = ?1 AND owner <> '' AND expires > {live_after}`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE name IN (SELECT name FROM {t} WHERE expires < {now} - ?1 AND intent_expires < {now} - ?2 LIMIT ?3)`)
	cleanupHolders := r.Replace(`DELETE FROM {h} WHERE (name, owner) IN (SELECT name, owner FROM {h} WHERE expires < {now} - ?1 LIMIT ?2)`)
	holders := r.Replace(`SELECT name, owner, fence, expires - {now}, meta, 0, 0, delay FROM {t} WHERE owner NOT IN ('', '*') AND expires > {live_after}
UNION ALL
SELECT name, owner, fence, expires - {now}, meta, shared, lim, delay FROM {h} WHERE expires > {live_after}
ORDER BY 1, 3`)
	multi := newMultiSQL(t, h, clock{now: sqliteNow, liveAfter: liveAfter, plus: sqliteNow + ` + ?`, left: func(c string) string { return c + ` - ` + sqliteNow }}, false)
	// The first statement of the transaction writes, so it takes SQLite's
	// write lock (waiting out the busy timeout) before reading anything.
	multi.lock = []string{r.Replace(`INSERT INTO {t} (name, owner, fence, expires) VALUES (?1, '', 0, {now})
ON CONFLICT (name) DO UPDATE SET owner = owner
RETURNING {now}, owner, fence, expires - {now}, lim, intent, intent_expires - {now}`)}
	// The batched refresh's first statement, a write, locks the database.
	multi.refresh.lock, multi.refresh.returning = "", true

	q := &queries{
		migrate: func(ctx context.Context, db *sql.DB) error {
			for _, s := range schema {
				if _, err := db.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("create table %s: %w", table, err)
				}
			}
			const columnsOf = `SELECT name FROM pragma_table_info(?1)`
			if err := addColumns(ctx, db, columnsOf, table, columns); err != nil {
				return err
			}
			return addColumns(ctx, db, columnsOf, holdersTable(table), holderColumns)
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (outcome, error) {
			var fence int64
			err := queryRow(ctx, db, acquire, []any{l.Name, l.Owner, leaseUs(l), l.Metadata, l.Takeover, micros(l.Delay)}, &fence)
			if err == nil {
				return outcome{Result: driver.Result{Acquired: true, Fence: uint64(fence)}}, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return outcome{}, err
			}
			var (
				o       outcome
				us, ttl int64
				stamp   string
			)
			err = queryRow(ctx, db, remaining, []any{l.Name}, &us, &o.multi, &o.lim, &stamp, &ttl)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return o, nil // freed since: try again
			case err != nil:
				return outcome{}, err
			}
			o.Result = notTaken(us, o.multi, stamp, ttl, bound)
			return o, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]uint64, error) {
			var b strings.Builder
			args := make([]any, 0, 5*len(ls))
			b.WriteString(r.Replace(`UPDATE {t} SET expires = {now} + v.column3, ttl = v.column3, delay = v.column5 FROM (VALUES `))
			for i, l := range ls {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?)")
				args = append(args, l.Name, l.Owner, leaseUs(l), int64(l.Fence), micros(l.Delay))
			}
			// A lease in doubt (ended less than the clock bound ago) is
			// still its holder's, so it is extended too.
			b.WriteString(r.Replace(`) AS v WHERE {t}.name = v.column1 AND {t}.owner = v.column2 AND (v.column4 = 0 OR {t}.fence = v.column4)
	AND {t}.expires > {live_after} RETURNING name, owner, fence`))
			rows, err := db.QueryContext(ctx, b.String(), args...)
			if err != nil {
				return nil, err
			}
			return heldSet(rows)
		},
		cleanupSQL:        cleanup,
		cleanupHoldersSQL: cleanupHolders,
		holdersSQL:        holders,
		multi:             multi,
	}
	q.release, q.forceRelease = execReleases(release, force)
	return q
}
