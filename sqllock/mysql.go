package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// mysqlNow is the server's clock, in UTC so that no time zone or DST
// change of the session moves it; NOW(6) and its kin are fixed for the
// whole statement.
const mysqlNow = `UTC_TIMESTAMP(6)`

func mysqlQueries(table string) *queries {
	t := "`" + table + "`"
	r := strings.NewReplacer("{t}", t, "{now}", mysqlNow, "{table}", table)
	schema := r.Replace("CREATE TABLE IF NOT EXISTS {t} (\n" +
		"\tname    VARBINARY(255) NOT NULL PRIMARY KEY,\n" +
		"\towner   VARBINARY(255) NOT NULL,\n" +
		"\tfence   BIGINT NOT NULL,\n" +
		"\texpires DATETIME(6) NOT NULL,\n" +
		"\tmeta    VARBINARY(1024) NOT NULL DEFAULT '',\n" +
		"\tKEY `{table}_expires` (expires)\n" +
		") ENGINE=InnoDB")
	// The assignments of ON DUPLICATE KEY UPDATE run left to right and
	// each sees the columns assigned before it: fence and owner read the
	// old row, expires reads the new owner.
	acquire := r.Replace(`INSERT INTO {t} (name, owner, fence, expires, meta)
VALUES (?, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {now}), TIMESTAMPADD(MICROSECOND, ?, {now}), ?)
ON DUPLICATE KEY UPDATE
	fence = IF(owner = VALUES(owner), fence,
		IF(owner = '' OR expires <= {now}, GREATEST(VALUES(fence), fence + 1), fence)),
	owner = IF(owner = VALUES(owner) OR owner = '' OR expires <= {now}, VALUES(owner), owner),
	expires = IF(owner = VALUES(owner), VALUES(expires), expires),
	meta = IF(owner = VALUES(owner), VALUES(meta), meta)`)
	outcome := r.Replace(`SELECT owner = ? AND expires > {now}, fence, IF(owner = '', 0, TIMESTAMPDIFF(MICROSECOND, {now}, expires)) FROM {t} WHERE name = ?`)
	release := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ? AND owner = ? AND expires > {now}`)
	force := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ? AND owner <> '' AND expires > {now}`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE expires < TIMESTAMPADD(MICROSECOND, -?, {now}) LIMIT ?`)
	holders := r.Replace(`SELECT name, owner, fence, TIMESTAMPDIFF(MICROSECOND, {now}, expires), meta FROM {t} WHERE owner <> '' AND expires > {now} ORDER BY name`)

	q := &queries{
		migrate: func(ctx context.Context, db *sql.DB) error {
			if _, err := db.ExecContext(ctx, schema); err != nil {
				return fmt.Errorf("create table %s: %w", table, err)
			}
			return nil
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (driver.Result, error) {
			if _, err := db.ExecContext(ctx, acquire, l.Name, l.Owner, micros(l.TTL), l.Metadata); err != nil {
				return driver.Result{}, err
			}
			var (
				mine      bool
				fence, us int64
			)
			err := queryRow(ctx, db, outcome, []any{l.Owner, l.Name}, &mine, &fence, &us)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// Deleted since the upsert: not ours; try again.
				return driver.Result{}, nil
			case err != nil:
				return driver.Result{}, err
			case mine:
				return driver.Result{Acquired: true, Fence: uint64(fence)}, nil
			}
			return driver.Result{Remaining: fromMicros(us)}, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]bool, error) {
			// One UPDATE extends the rows still held by their owners, then
			// one SELECT finds them: a row that shows its owner with an
			// unexpired lease after the UPDATE was extended by it, since
			// only this owner can extend it.
			var ttl, match, names strings.Builder
			args := make([]any, 0, 5*len(ls))
			sel := make([]any, 0, len(ls))
			for i, l := range ls {
				if i > 0 {
					match.WriteString(" OR ")
					names.WriteString(", ")
				}
				ttl.WriteString(" WHEN ? THEN ?")
				match.WriteString("(name = ? AND owner = ?)")
				names.WriteString("?")
				sel = append(sel, l.Name)
			}
			for _, l := range ls {
				args = append(args, l.Name, micros(l.TTL))
			}
			for _, l := range ls {
				args = append(args, l.Name, l.Owner)
			}
			update := r.Replace(`UPDATE {t} SET expires = TIMESTAMPADD(MICROSECOND, CASE name` + ttl.String() +
				` END, {now}) WHERE (` + match.String() + `) AND expires > {now}`)
			if _, err := db.ExecContext(ctx, update, args...); err != nil {
				return nil, err
			}
			rows, err := db.QueryContext(ctx, r.Replace(`SELECT name, owner FROM {t} WHERE name IN (`+names.String()+`) AND expires > {now}`), sel...)
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
