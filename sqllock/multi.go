package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// multiOwner is the owner a name's row shows while shared holders or
// semaphore permits hold it: never a lease owner (those contain a ':').
// The row's expires is then the latest lease of any of them, so the
// exclusive steps, which read only the row, need no other table.
const multiOwner = "*"

// holdersSuffix names the table of shared holders and permits after the
// lease table.
const holdersSuffix = "_holders"

// holdersTable returns the name of the holders table of table.
func holdersTable(table string) string { return derivedName(table, holdersSuffix) }

// derivedName returns the name of an object of table (its holders table,
// an index): table + suffix, or, where that would pass 63 bytes
// (PostgreSQL truncates longer identifiers, MySQL refuses them), a prefix
// of table, a hash of it and the suffix, so that no two derived names
// collide and none is cut.
func derivedName(table, suffix string) string {
	if len(table)+len(suffix) <= 63 {
		return table + suffix
	}
	h := fnv.New32a()
	h.Write([]byte(table))
	return fmt.Sprintf("%s_%08x%s", table[:63-len(suffix)-9], h.Sum32(), suffix)
}

// clock is how a dialect writes the database's clock in SQL.
type clock struct {
	now       string              // the current time, in the type of expires
	liveAfter string              // now minus the clock bound: a holder whose lease ends later is live
	plus      string              // now plus one parameter in µs
	left      func(string) string // µs from now to a column's time
}

// multiSQL are the statements of the multi-holder steps (shared holds,
// semaphore permits, writer intents) of one dialect and table. They run
// in a transaction that begins by locking the name's row (lock), so that
// the row's summary (owner multiOwner, expires, lim) always describes
// the holders table, which the exclusive steps never read.
type multiSQL struct {
	txOpts *sql.TxOptions
	lock   []string // ensure name's row exists and lock it; the last returns rowState's columns
	live   string   // owner, fence, µs left of name's live holders
	purge  string   // delete name's expired holders
	insert string   // name, owner, fence, ttl+delay, meta, shared, lim, delay
	extend string   // ttl+delay, delay, name, owner: extend a live holder
	remove string   // name, owner: delete a live holder
	sum    string   // fence, owner whose intent to clear, name ×4: the row's summary
	intent string   // owner, ttl, name, owner: record a writer's intent
	clear  string   // name, owner: clear owner's intent
	force  string   // name: delete every holder
	notify string   // channel, name: wake waiters (PostgreSQL), or ""

	resumeRow    string // see resumeArgs: move an exclusive hold (the lease table's row) to another owner
	resumeHolder string // see resumeArgs, then shared, lim: move a shared hold or permit (a holders row)

	refresh multiRefreshSQL // the batched refresh
}

// summary is the SET list that makes a name's row sum up its live
// holders in {h} (h), where live is the condition on h: whether any
// holds it, the limit they hold it with, and when the last lease ends.
func summary(live string) string {
	return `owner = CASE WHEN EXISTS (SELECT 1 FROM {h} h WHERE ` + live + `) THEN '*' ELSE '' END,
	lim = COALESCE((SELECT MAX(h.lim) FROM {h} h WHERE ` + live + `), 0),
	expires = COALESCE((SELECT MAX(h.expires) FROM {h} h WHERE ` + live + `), {now})`
}

// newMultiSQL writes the multi-holder statements with ? parameters;
// numbered turns them into $n for PostgreSQL.
func newMultiSQL(t, h string, c clock, numbered bool) multiSQL {
	r := strings.NewReplacer("{t}", t, "{h}", h, "{now}", c.now, "{live_after}", c.liveAfter, "{plus}", c.plus,
		"{left_h}", c.left("expires"))
	// A holder is live until the clock bound after its lease ends by the
	// database's clock: a forward step of that clock by up to the bound
	// does not end it under its holder.
	live := `h.name = ? AND h.expires > {live_after}`
	m := multiSQL{
		live:   r.Replace(`SELECT owner, fence, {left_h} FROM {h} WHERE name = ? AND expires > {live_after}`),
		purge:  r.Replace(`DELETE FROM {h} WHERE name = ? AND expires <= {live_after}`),
		insert: r.Replace(`INSERT INTO {h} (name, owner, fence, expires, meta, shared, lim, delay) VALUES (?, ?, ?, {plus}, ?, ?, ?, ?)`),
		extend: r.Replace(`UPDATE {h} SET expires = {plus}, delay = ? WHERE name = ? AND owner = ? AND expires > {live_after}`),
		remove: r.Replace(`DELETE FROM {h} WHERE name = ? AND owner = ? AND expires > {live_after}`),
		sum: r.Replace(`UPDATE {t} SET fence = ?,
	intent = CASE WHEN intent = ? THEN '' ELSE intent END,
	` + summary(live) + `
WHERE name = ?`),
		intent: r.Replace(`UPDATE {t} SET intent = ?, intent_expires = {plus}
WHERE name = ? AND owner = '*' AND lim = 0 AND expires > {live_after} AND (intent = '' OR intent = ? OR intent_expires <= {now})`),
		clear: r.Replace(`UPDATE {t} SET intent = '' WHERE name = ? AND intent = ?`),
		force: r.Replace(`DELETE FROM {h} WHERE name = ?`),
		// A hold is resumed while its holder could still renew it: until
		// the clock bound after its lease ended (see Options.ClockBound).
		resumeRow: r.Replace(`UPDATE {t} SET owner = ?, meta = ?, expires = {plus}, ttl = ?, delay = ?
WHERE name = ? AND owner = ? AND fence = ? AND expires > {live_after}`),
		resumeHolder: r.Replace(`UPDATE {h} SET owner = ?, meta = ?, expires = {plus}, delay = ?
WHERE name = ? AND owner = ? AND fence = ? AND expires > {live_after} AND shared = ? AND lim = ?`),

		refresh: newMultiRefreshSQL(t, h, c, numbered),
	}
	if numbered {
		for _, s := range []*string{&m.live, &m.purge, &m.insert, &m.extend, &m.remove, &m.sum, &m.intent, &m.clear, &m.force, &m.resumeRow, &m.resumeHolder} {
			*s = dollarParams(*s)
		}
	}
	return m
}

// dollarParams numbers the ? parameters of s as PostgreSQL's $1, $2, ...
func dollarParams(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rowState is a name's row as the multi-holder steps see it, locked.
type rowState struct {
	nowUs      int64  // the database's clock
	owner      string // an exclusive holder, multiOwner, or "" when free
	fence      int64  // the last token issued for the name
	leftUs     int64  // µs until the row's lease ends (negative if it has)
	boundUs    int64  // the clock bound: the row is held until leftUs + boundUs runs out
	lim        int    // the semaphore's limit while multiOwner holds
	intent     string // a waiting writer's owner
	intentLeft int64  // µs until the intent lapses
}

// holding reports whether an exclusive holder holds the row: its lease
// has not ended, or ended less than the clock bound ago (in doubt; only
// an exclusive acquire takes it over then, see Options.ClockBound).
func (s rowState) holding() bool {
	return s.owner != "" && s.owner != multiOwner && s.leftUs+s.boundUs > 0
}

// multi reports whether shared holders or permits (some live) hold it.
func (s rowState) multi() bool { return s.owner == multiOwner && s.leftUs+s.boundUs > 0 }

// untilFree is how long a lease with leftUs left by the database's clock
// keeps a waiter out: its lease, or once that ended, until it ended the
// clock bound ago.
func untilFree(leftUs, boundUs int64) int64 {
	if leftUs > 0 {
		return leftUs
	}
	return leftUs + boundUs
}

// inTx runs f in a transaction on d.db with the dialect's options, and
// commits it if f returns commit true and no error.
func (d *sqlDriver) inTx(ctx context.Context, f func(tx *sql.Tx) (commit bool, err error)) error {
	return d.inTxOn(ctx, d.db, f)
}

// inTxOn is inTx on db: the Locker's pool, or one connection of it.
func (d *sqlDriver) inTxOn(ctx context.Context, db stepDB, f func(tx *sql.Tx) (commit bool, err error)) error {
	tx, err := db.BeginTx(ctx, d.q.multi.txOpts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	commit, err := f(tx)
	if err != nil || !commit {
		return err
	}
	return tx.Commit()
}

// lockRow makes sure name has a row, locks it until tx ends and returns it.
func (d *sqlDriver) lockRow(ctx context.Context, tx *sql.Tx, name string) (rowState, error) {
	m := &d.q.multi
	for _, s := range m.lock[:len(m.lock)-1] {
		if _, err := tx.ExecContext(ctx, s, name); err != nil {
			return rowState{}, err
		}
	}
	var (
		s             rowState
		owner, intent []byte
	)
	err := queryRow(ctx, tx, m.lock[len(m.lock)-1], []any{name}, &s.nowUs, &owner, &s.fence, &s.leftUs, &s.lim, &intent, &s.intentLeft)
	s.owner, s.intent, s.boundUs = string(owner), string(intent), micros(d.bound)
	return s, err
}

// liveHolder is a live shared holder or permit.
type liveHolder struct {
	owner  string
	fence  int64
	leftUs int64
}

func (d *sqlDriver) liveHolders(ctx context.Context, tx *sql.Tx, name string) ([]liveHolder, error) {
	rows, err := tx.QueryContext(ctx, d.q.multi.live, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []liveHolder
	for rows.Next() {
		var (
			h     liveHolder
			owner []byte
		)
		if err := rows.Scan(&owner, &h.fence, &h.leftUs); err != nil {
			return nil, err
		}
		h.owner = string(owner)
		hs = append(hs, h)
	}
	return hs, rows.Err()
}

// acquireMulti is Acquire for a shared hold or a semaphore permit: in a
// transaction holding the name's row, it checks the mode, the exclusive
// holder, the writer's intent and the permits left, then adds a holder
// with a token above the row's last one and updates the row's summary.
func (d *sqlDriver) acquireMulti(ctx context.Context, db stepDB, l driver.Lease) (driver.Result, error) {
	m := &d.q.multi
	var res driver.Result
	err := d.inTxOn(ctx, db, func(tx *sql.Tx) (bool, error) {
		res = driver.Result{}
		s, err := d.lockRow(ctx, tx, l.Name)
		if err != nil {
			return false, err
		}
		remaining := func(us int64) {
			if r := fromMicros(us); res.Remaining == 0 || r < res.Remaining {
				res.Remaining = r
			}
		}
		switch {
		case s.holding() && l.Limit > 0, s.multi() && s.lim != l.Limit:
			return false, fmt.Errorf("acquire as %s: held as %s: %w", mode(l.Limit), rowMode(s), driver.ErrMode)
		case s.holding():
			remaining(untilFree(s.leftUs, s.boundUs))
			if l.Shared && s.intent != "" && s.intent != l.Owner && s.intentLeft > 0 {
				remaining(s.intentLeft)
			}
			return false, nil
		}
		if _, err := tx.ExecContext(ctx, m.purge, l.Name); err != nil {
			return false, err
		}
		hs, err := d.liveHolders(ctx, tx, l.Name)
		if err != nil {
			return false, err
		}
		fence := s.fence
		switch i := indexHolder(hs, l.Owner); {
		case i >= 0: // a retry whose reply was lost: extend, same token
			if _, err := tx.ExecContext(ctx, m.extend, leaseUs(l), micros(l.Delay), l.Name, l.Owner); err != nil {
				return false, err
			}
			res.Fence = uint64(hs[i].fence)
		case l.Limit > 0 && len(hs) >= l.Limit:
			for _, h := range hs {
				remaining(untilFree(h.leftUs, s.boundUs))
			}
			return false, nil
		case l.Shared && s.intent != "" && s.intent != l.Owner && s.intentLeft > 0:
			remaining(s.intentLeft)
			return false, nil
		default:
			fence = max(s.nowUs, s.fence+1)
			if _, err := tx.ExecContext(ctx, m.insert, l.Name, l.Owner, fence, leaseUs(l), l.Metadata, l.Shared, l.Limit, micros(l.Delay)); err != nil {
				return false, err
			}
			res.Fence = uint64(fence)
		}
		if _, err := tx.ExecContext(ctx, m.sum, fence, l.Owner, l.Name, l.Name, l.Name, l.Name); err != nil {
			return false, err
		}
		res.Acquired = true
		return true, nil
	})
	return res, err
}

func indexHolder(hs []liveHolder, owner string) int {
	for i, h := range hs {
		if h.owner == owner {
			return i
		}
	}
	return -1
}

func mode(limit int) string {
	if limit > 0 {
		return fmt.Sprintf("a semaphore of %d", limit)
	}
	return "a lock"
}

func rowMode(s rowState) string {
	if s.owner == multiOwner {
		return mode(s.lim)
	}
	return mode(0)
}

// releaseMulti deletes a shared hold or permit that l.Owner holds, updates
// the row's summary (free once no holder is left) and, on PostgreSQL,
// wakes waiters. It reports whether l.Owner held it.
func (d *sqlDriver) releaseMulti(ctx context.Context, l driver.Lease) (bool, error) {
	m := &d.q.multi
	var removed bool
	err := d.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		s, err := d.lockRow(ctx, tx, l.Name)
		if err != nil {
			return false, err
		}
		if removed, err = affected(tx.ExecContext(ctx, m.remove, l.Name, l.Owner)); err != nil || !removed {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, m.sum, s.fence, "", l.Name, l.Name, l.Name, l.Name); err != nil {
			return false, err
		}
		return true, d.notify(ctx, tx, l.Name)
	})
	return removed, err
}

// notify wakes name's waiters when tx commits, on PostgreSQL.
func (d *sqlDriver) notify(ctx context.Context, tx *sql.Tx, name string) error {
	if d.q.multi.notify == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, d.q.multi.notify, d.table, name)
	return err
}

// recordIntent records l.Owner's intent to take the name that readers
// hold (see driver.Lease.Waiting), unless another writer's live intent is
// there. It reports whether the intent is l.Owner's.
func (d *sqlDriver) recordIntent(ctx context.Context, db querier, l driver.Lease) (bool, error) {
	return affected(db.ExecContext(ctx, d.q.multi.intent, l.Owner, micros(l.TTL), l.Name, l.Owner))
}

// clearIntent removes l.Owner's writer intent, if there is one, and wakes
// the readers it kept waiting.
func (d *sqlDriver) clearIntent(ctx context.Context, l driver.Lease) error {
	return d.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		ok, err := affected(tx.ExecContext(ctx, d.q.multi.clear, l.Name, l.Owner))
		if err != nil || !ok {
			return false, err
		}
		return true, d.notify(ctx, tx, l.Name)
	})
}
