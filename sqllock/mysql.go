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

// mysqlNow is the server's clock, in UTC so that no time zone or DST
// change of the session moves it; NOW(6) and its kin are fixed for the
// whole statement.
const mysqlNow = `UTC_TIMESTAMP(6)`

func mysqlQueries(table string, bound time.Duration) *queries {
	t, h := "`"+table+"`", "`"+holdersTable(table)+"`"
	liveAfter := `TIMESTAMPADD(MICROSECOND, -` + strconv.FormatInt(micros(bound), 10) + `, ` + mysqlNow + `)`
	// stamp is a row's state for driver.Result.Stamp: owner, token and
	// expiry in µs, which every renewal, change of holder and release
	// changes.
	const stamp = `CONCAT_WS('|', owner, fence, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires))`
	r := strings.NewReplacer("{t}", t, "{h}", h, "{now}", mysqlNow, "{live_after}", liveAfter, "{stamp}", stamp,
		"{table}", table, "{holders}", holdersTable(table),
		"{table_index}", derivedName(table, "_expires"), "{holders_index}", derivedName(table, holdersSuffix+"_expires"))
	schema := []string{
		r.Replace("CREATE TABLE IF NOT EXISTS {t} (\n" +
			"\tname    VARBINARY(255) NOT NULL PRIMARY KEY,\n" +
			"\towner   VARBINARY(255) NOT NULL,\n" +
			"\tfence   BIGINT NOT NULL,\n" +
			"\texpires DATETIME(6) NOT NULL,\n" +
			"\tmeta    VARBINARY(1024) NOT NULL DEFAULT '',\n" +
			"\tlim     INT NOT NULL DEFAULT 0,\n" +
			"\tintent  VARBINARY(255) NOT NULL DEFAULT '',\n" +
			"\tintent_expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',\n" +
			"\tttl     BIGINT NOT NULL DEFAULT 0,\n" +
			"\tdelay   BIGINT NOT NULL DEFAULT 0,\n" +
			"\tKEY `{table_index}` (expires)\n" +
			") ENGINE=InnoDB"),
		r.Replace("CREATE TABLE IF NOT EXISTS {h} (\n" +
			"\tname    VARBINARY(255) NOT NULL,\n" +
			"\towner   VARBINARY(255) NOT NULL,\n" +
			"\tfence   BIGINT NOT NULL,\n" +
			"\texpires DATETIME(6) NOT NULL,\n" +
			"\tmeta    VARBINARY(1024) NOT NULL DEFAULT '',\n" +
			"\tshared  BOOLEAN NOT NULL,\n" +
			"\tlim     INT NOT NULL,\n" +
			"\tdelay   BIGINT NOT NULL DEFAULT 0,\n" +
			"\tPRIMARY KEY (name, owner),\n" +
			"\tKEY `{holders_index}` (expires)\n" +
			") ENGINE=InnoDB"),
	}
	columns := []column{
		{"lim", r.Replace(`ALTER TABLE {t} ADD COLUMN lim INT NOT NULL DEFAULT 0`)},
		{"intent", r.Replace(`ALTER TABLE {t} ADD COLUMN intent VARBINARY(255) NOT NULL DEFAULT ''`)},
		{"intent_expires", r.Replace(`ALTER TABLE {t} ADD COLUMN intent_expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00'`)},
		{"ttl", r.Replace(`ALTER TABLE {t} ADD COLUMN ttl BIGINT NOT NULL DEFAULT 0`)},
		{"delay", r.Replace(`ALTER TABLE {t} ADD COLUMN delay BIGINT NOT NULL DEFAULT 0`)},
	}
	holderColumns := []column{
		{"delay", r.Replace(`ALTER TABLE {h} ADD COLUMN delay BIGINT NOT NULL DEFAULT 0`)},
	}
	// The assignments of ON DUPLICATE KEY UPDATE run left to right and
	// each sees the columns assigned before it: fence and owner read the
	// old row, expires, meta and ttl read the new owner. A row is taken
	// when free or when its lease ended more than the clock bound ago.
	acquire := r.Replace(`INSERT INTO {t} (name, owner, fence, expires, meta, ttl, delay)
VALUES (?, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {now}), TIMESTAMPADD(MICROSECOND, ?, {now}), ?, ?, ?)
ON DUPLICATE KEY UPDATE
	fence = IF(owner = VALUES(owner), fence,
		IF(owner = '' OR expires <= {live_after}, GREATEST(VALUES(fence), fence + 1), fence)),
	owner = IF(owner = VALUES(owner) OR owner = '' OR expires <= {live_after}, VALUES(owner), owner),
	expires = IF(owner = VALUES(owner), VALUES(expires), expires),
	meta = IF(owner = VALUES(owner), VALUES(meta), meta),
	ttl = IF(owner = VALUES(owner), VALUES(ttl), ttl),
	delay = IF(owner = VALUES(owner), VALUES(delay), delay),
	intent = IF(owner = VALUES(owner) AND intent = VALUES(owner), '', intent)`)
	// takeover takes a row in doubt whose stamp is the takeover: a
	// statement of its own, run only with a takeover, since the
	// assignments of the upsert could not all read the old token.
	takeover := r.Replace(`UPDATE {t} SET fence = GREATEST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {now}), fence + 1),
	owner = ?, expires = TIMESTAMPADD(MICROSECOND, ?, {now}), meta = ?, ttl = ?, delay = ?, intent = IF(intent = ?, '', intent)
WHERE name = ? AND owner NOT IN ('', '*') AND {stamp} = ?`)
	// result reads the outcome: whether owner holds the row, its token,
	// the lease left, whether shared holders or permits hold it, their
	// limit, the row's stamp (for an exclusive holder), and its holder's TTL.
	result := r.Replace(`SELECT owner = ? AND expires > {now}, fence, IF(owner = '', 0, TIMESTAMPDIFF(MICROSECOND, {now}, expires)),
	owner = '*' AND expires > {live_after}, lim,
	IF(owner NOT IN ('', '*'), {stamp}, ''), ttl
FROM {t} WHERE name = ?`)
	release := r.Replace(`UPDATE {t} SET owner = '', expires = {now} WHERE name = ? AND owner = ? AND expires > {live_after}`)
	force := r.Replace(`UPDATE {t} SET owner = '', expires = {now}, intent = '' WHERE name = ? AND owner <> '' AND expires > {live_after}`)
	cleanup := r.Replace(`DELETE FROM {t} WHERE expires < TIMESTAMPADD(MICROSECOND, -?, {now})
	AND intent_expires < TIMESTAMPADD(MICROSECOND, -?, {now}) LIMIT ?`)
	cleanupHolders := r.Replace(`DELETE FROM {h} WHERE expires < TIMESTAMPADD(MICROSECOND, -?, {now}) LIMIT ?`)
	holders := r.Replace(`SELECT name, owner, fence, TIMESTAMPDIFF(MICROSECOND, {now}, expires), meta, FALSE, 0, delay FROM {t} WHERE owner NOT IN ('', '*') AND expires > {live_after}
UNION ALL
SELECT name, owner, fence, TIMESTAMPDIFF(MICROSECOND, {now}, expires), meta, shared, lim, delay FROM {h} WHERE expires > {live_after}
ORDER BY 1, 3`)
	left := func(c string) string { return `TIMESTAMPDIFF(MICROSECOND, ` + mysqlNow + `, ` + c + `)` }
	multi := newMultiSQL(t, h, clock{now: mysqlNow, liveAfter: liveAfter, plus: `TIMESTAMPADD(MICROSECOND, ?, ` + mysqlNow + `)`, left: left}, false)
	// READ COMMITTED: every statement reads the latest commits, and
	// searches take no gap locks. The upsert locks the row (creating it
	// if missing), the locking read returns it.
	multi.txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	multi.lock = []string{
		r.Replace(`INSERT INTO {t} (name, owner, fence, expires) VALUES (?, '', 0, {now}) ON DUPLICATE KEY UPDATE owner = owner`),
		r.Replace(`SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {now}), owner, fence, ` + left("expires") + `, lim, intent, ` + left("intent_expires") + `
FROM {t} WHERE name = ? FOR UPDATE`),
	}

	q := &queries{
		migrate: func(ctx context.Context, db *sql.DB) error {
			for _, s := range schema {
				if _, err := db.ExecContext(ctx, s); err != nil {
					if (errorKinds{}).Classify(err) == driver.ErrorDenied {
						return fmt.Errorf("create table %s (a user without CREATE opens with migrate=false, Options.NoMigrate, once Migrate made it): %w", table, err)
					}
					return fmt.Errorf("create table %s: %w", table, err)
				}
			}
			const columnsOf = `SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?`
			if err := addColumns(ctx, db, columnsOf, table, columns); err != nil {
				return err
			}
			return addColumns(ctx, db, columnsOf, holdersTable(table), holderColumns)
		},
		acquire: func(ctx context.Context, db querier, l driver.Lease) (outcome, error) {
			took := false
			if l.Takeover != "" {
				var err error
				took, err = affected(db.ExecContext(ctx, takeover, l.Owner, leaseUs(l), l.Metadata, leaseUs(l), micros(l.Delay), l.Owner, l.Name, l.Takeover))
				if err != nil {
					return outcome{}, err
				}
			}
			if !took {
				if _, err := db.ExecContext(ctx, acquire, l.Name, l.Owner, leaseUs(l), l.Metadata, leaseUs(l), micros(l.Delay)); err != nil {
					return outcome{}, err
				}
			}
			var (
				o             outcome
				mine          bool
				fence, us, tu int64
				stamp         []byte
			)
			err := queryRow(ctx, db, result, []any{l.Owner, l.Name}, &mine, &fence, &us, &o.multi, &o.lim, &stamp, &tu)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// Deleted since the upsert: not ours; try again.
				return outcome{}, nil
			case err != nil:
				return outcome{}, err
			case mine:
				return outcome{Result: driver.Result{Acquired: true, Fence: uint64(fence)}}, nil
			}
			o.Result = notTaken(us, o.multi, string(stamp), tu, bound)
			return o, nil
		},
		refresh: func(ctx context.Context, db querier, ls []driver.Lease) (map[leaseKey]uint64, error) {
			// One UPDATE extends the rows still held by their owners (with
			// their tokens; a lease in doubt is still its holder's), then
			// one SELECT finds them: a row that shows its owner with an
			// unexpired lease after the UPDATE was extended by it, since
			// only this owner can extend it; the caller compares the
			// token.
			// Each lease gets its own TTL and delay, by name (a name has
			// one exclusive row, which only its owner's lease matches).
			var cases, match, names strings.Builder
			args := make([]any, 0, 10*len(ls))
			sel := make([]any, 0, len(ls))
			var ttls, delays []any
			for i, l := range ls {
				if i > 0 {
					match.WriteString(" OR ")
					names.WriteString(", ")
				}
				cases.WriteString(" WHEN ? THEN ?")
				match.WriteString("(name = ? AND owner = ? AND (? = 0 OR fence = ?))")
				names.WriteString("?")
				sel = append(sel, l.Name)
				ttls = append(ttls, l.Name, leaseUs(l))
				delays = append(delays, l.Name, micros(l.Delay))
			}
			args = append(append(append(append(args, ttls...), ttls...), delays...), sel...)
			for _, l := range ls {
				args = append(args, l.Name, l.Owner, int64(l.Fence), int64(l.Fence))
			}
			c := `CASE name` + cases.String() + ` END`
			update := r.Replace(`UPDATE {t} FORCE INDEX (PRIMARY) SET expires = TIMESTAMPADD(MICROSECOND, ` + c + `, {now}), ttl = ` + c + `, delay = ` + c +
				` WHERE name IN (` + names.String() + `) AND (` + match.String() + `) AND expires > {live_after}`)
			if _, err := db.ExecContext(ctx, update, args...); err != nil {
				return nil, err
			}
			rows, err := db.QueryContext(ctx, r.Replace(`SELECT name, owner, fence FROM {t} WHERE name IN (`+names.String()+`) AND expires > {now}`), sel...)
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

// mysqlDriver adds wake-ups by named locks to the MySQL driver.
type mysqlDriver struct {
	*sqlDriver
	wk *namedLocks
}

func (d *mysqlDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	res, err := d.sqlDriver.Acquire(ctx, l)
	if err == nil && res.Acquired && !l.Shared && l.Limit == 0 {
		d.wk.take(l.Name, l.Owner)
	}
	return res, err
}

func (d *mysqlDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := d.sqlDriver.Refresh(ctx, ls)
	for i, err := range errs {
		if errors.Is(err, driver.ErrNotHeld) {
			d.wk.drop(ls[i].Name, ls[i].Owner)
		}
	}
	return errs
}

// Release frees the row, then the named lock, whatever the row's
// outcome: a lease found lost holds nothing either.
func (d *mysqlDriver) Release(ctx context.Context, l driver.Lease) error {
	err := d.sqlDriver.Release(ctx, l)
	if !l.Shared && l.Limit == 0 {
		d.wk.drop(l.Name, l.Owner)
	}
	return err
}

func (d *mysqlDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop, err := d.wk.watch(name)
	if err != nil {
		return nil, nil, fmt.Errorf("sqllock: watch %q: %w", name, err)
	}
	return w, stop, nil
}

func (d *mysqlDriver) Close() error {
	d.wk.close()
	return d.sqlDriver.Close()
}

var (
	_ driver.Driver   = (*mysqlDriver)(nil)
	_ driver.Notifier = (*mysqlDriver)(nil)
)

// Extend is the refresh of one lease (see sqlDriver.Extend), through
// mysqlDriver's Refresh, which lets the named lock go with a lost lease.
func (d *mysqlDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// Resume moves the hold (see sqlDriver.Resume) and, for an exclusive
// one, hands the name's named lock over to this Locker (see
// wake_mysql_resume.go).
func (d *mysqlDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	res, err := d.sqlDriver.Resume(ctx, from, to)
	if err == nil && !to.Shared && to.Limit == 0 {
		d.wk.handOver(ctx, to.Name, from.Owner, to.Owner)
	}
	return res, err
}
