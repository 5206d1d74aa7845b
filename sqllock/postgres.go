package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// PostgreSQL's now() is the start of the transaction; clock_timestamp() is
// the time of the call, which is what a lease must be measured against.
func postgresQueries(table string) *queries {
	t := `"` + table + `"`
	r := strings.NewReplacer("{t}", t, "{table}", table,
		"{now_us}", `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`,
		"{left_us}", `(extract(epoch FROM (expires - clock_timestamp())) * 1000000)::bigint`)
	schema := []string{
		r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	name    text COLLATE "C" PRIMARY KEY,
	owner   text NOT NULL,
	fence   bigint NOT NULL,
	expires timestamptz NOT NULL,
	meta    text NOT NULL DEFAULT ''
)`),
		r.Replace(`CREATE INDEX IF NOT EXISTS "{table}_expires" ON {t} (expires)`),
	}
	// One statement: the upsert, and if it took nothing, the holder's
	// remaining lease.
	acquire := r.Replace(`WITH taken AS (
	INSERT INTO {t} AS l (name, owner, fence, expires, meta)
	VALUES ($1, $2, {now_us}, clock_timestamp() + $3::bigint * interval '1 microsecond', $4)
	ON CONFLICT (name) DO UPDATE SET
		fence = CASE WHEN l.owner = excluded.owner THEN l.fence ELSE GREATEST(excluded.fence, l.fence + 1) END,
		owner = excluded.owner,
		expires = excluded.expires,
		meta = excluded.meta
	WHERE l.owner = excluded.owner OR l.owner = '' OR l.expires <= clock_timestamp()
	RETURNING fence
)
SELECT true, fence, 0::bigint FROM taken
UNION ALL
SELECT false, 0::bigint, GREATEST({left_us}, 0) FROM {t} WHERE name = $1 AND owner <> '' AND NOT EXISTS (SELECT FROM taken)`)
	// Release notifies in the same statement, so the notification is sent
	// exactly when the release commits.
	release := r.Replace(`WITH freed AS (
	UPDATE {t} SET owner = '', expires = clock_timestamp()
	WHERE name = $1 AND owner = $2 AND expires > clock_timestamp()
	RETURNING name
)
SELECT pg_notify($3, name)::text FROM freed`)
	force := r.Replace(`WITH freed AS (
	UPDATE {t} SET owner = '', expires = clock_timestamp()
	WHERE name = $1 AND owner <> '' AND expires > clock_timestamp()
	RETURNING name
)
SELECT pg_notify($2, name)::text FROM freed`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE name IN (
	SELECT name FROM {t} WHERE expires < clock_timestamp() - $1::bigint * interval '1 microsecond'
	LIMIT $2 FOR UPDATE SKIP LOCKED)`)
	holders := r.Replace(`SELECT name, owner, fence, {left_us}, meta FROM {t} WHERE owner <> '' AND expires > clock_timestamp() ORDER BY name`)
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
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("create table %s: %w", table, err)
			}
			return nil
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (driver.Result, error) {
			rows, err := db.QueryContext(ctx, acquire, l.Name, l.Owner, micros(l.TTL), l.Metadata)
			if err != nil {
				return driver.Result{}, err
			}
			defer rows.Close()
			var res driver.Result
			for rows.Next() {
				var fence, us int64
				if err := rows.Scan(&res.Acquired, &fence, &us); err != nil {
					return driver.Result{}, err
				}
				res.Fence, res.Remaining = uint64(fence), fromMicros(us)
			}
			if err := rows.Err(); err != nil {
				return driver.Result{}, err
			}
			return res, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]bool, error) {
			var b strings.Builder
			args := make([]any, 0, 3*len(ls))
			b.WriteString(r.Replace(`UPDATE {t} AS l SET expires = clock_timestamp() + v.ttl * interval '1 microsecond' FROM (VALUES `))
			for i, l := range ls {
				if i > 0 {
					b.WriteString(", ")
				}
				n := strconv.Itoa(3*i + 1)
				b.WriteString("($" + n + "::text, $" + strconv.Itoa(3*i+2) + "::text, $" + strconv.Itoa(3*i+3) + "::bigint)")
				args = append(args, l.Name, l.Owner, micros(l.TTL))
			}
			b.WriteString(`) AS v (name, owner, ttl) WHERE l.name = v.name AND l.owner = v.owner AND l.expires > clock_timestamp() RETURNING l.name, l.owner`)
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
		cleanupSQL: cleanup,
		holdersSQL: holders,
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
