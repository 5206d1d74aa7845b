package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// sqliteNow is the host's clock in microseconds since 1970, as SQLite
// sees it; 'now' is the same for the whole statement.
const sqliteNow = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`

func sqliteQueries(table string) *queries {
	t := `"` + table + `"`
	r := strings.NewReplacer("{t}", t, "{now}", sqliteNow, "{table}", table)
	schema := []string{
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	name    TEXT NOT NULL PRIMARY KEY,
	owner   TEXT NOT NULL,
	fence   INTEGER NOT NULL,
	expires INTEGER NOT NULL,
	meta    TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID`),
		r.Replace(`CREATE INDEX IF NOT EXISTS "{table}_expires" ON {t} (expires)`),
	}
	acquire := r.Replace(`INSERT INTO {t} (name, owner, fence, expires, meta) VALUES (?1, ?2, {now}, {now} + ?3, ?4)
ON CONFLICT (name) DO UPDATE SET
	fence = CASE WHEN owner = excluded.owner THEN fence ELSE max(excluded.fence, fence + 1) END,
	owner = excluded.owner,
	expires = excluded.expires,
	meta = excluded.meta
WHERE owner = excluded.owner OR owner = '' OR expires <= excluded.fence
RETURNING fence`)
	remaining := r.Replace(`SELECT expires - {now} FROM {t} WHERE name = ?1 AND owner <> ''`)
	release := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ?1 AND owner = ?2 AND expires > {now}`)
	force := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ?1 AND owner <> '' AND expires > {now}`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE name IN (SELECT name FROM {t} WHERE expires < {now} - ?1 LIMIT ?2)`)
	holders := r.Replace(`SELECT name, owner, fence, expires - {now}, meta FROM {t} WHERE owner <> '' AND expires > {now} ORDER BY name`)

	q := &queries{
		migrate: func(ctx context.Context, db *sql.DB) error {
			for _, s := range schema {
				if _, err := db.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("create table %s: %w", table, err)
				}
			}
			return nil
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (driver.Result, error) {
			var fence int64
			err := queryRow(ctx, db, acquire, []any{l.Name, l.Owner, micros(l.TTL), l.Metadata}, &fence)
			if err == nil {
				return driver.Result{Acquired: true, Fence: uint64(fence)}, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return driver.Result{}, err
			}
			var us int64
			err = queryRow(ctx, db, remaining, []any{l.Name}, &us)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return driver.Result{}, err
			}
			return driver.Result{Remaining: fromMicros(us)}, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]bool, error) {
			var b strings.Builder
			args := make([]any, 0, 3*len(ls))
			b.WriteString(r.Replace(`UPDATE {t} SET expires = {now} + v.column3 FROM (VALUES `))
			for i, l := range ls {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?)")
				args = append(args, l.Name, l.Owner, micros(l.TTL))
			}
			b.WriteString(r.Replace(`) AS v WHERE {t}.name = v.column1 AND {t}.owner = v.column2 AND {t}.expires > {now} RETURNING name, owner`))
			rows, err := db.QueryContext(ctx, b.String(), args...)
			if err != nil {
				return nil, err
			}
			return heldSet(rows)
		},
		cleanupSQL: cleanup,
		holdersSQL: holders,
	}
	q.release, q.forceRelease = execReleases(release, force)
	return q
}
