package sqllock

import (
	"context"
	"database/sql"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// multiRefreshSQL are the templates of the batched refresh of shared holds
// and permits, with ? parameters and placeholders that batch fills for
// each batch: {names} (one ? per lease), {match} (the holders' owner
// checks), {ttl} (the leases' TTL and lock-delay) and {delay} (their
// lock-delay).
type multiRefreshSQL struct {
	numbered  bool   // PostgreSQL: $n parameters, typed
	lock      string // locks the rows of {names} in name order, or "" (SQLite: the first write locks the database)
	extend    string // extends {match} in {names} by {ttl}, sets delay; with returning, returns name, owner, fence
	returning bool   // extend returns the holders it extended, else held does
	held      string // name, owner, fence of the live holders of {match} in {names}
	sum       string // the summaries of the rows of {names}
}

// newMultiRefreshSQL writes the batched refresh's templates for table t,
// holders table h and clock c.
func newMultiRefreshSQL(t, h string, c clock, numbered bool) multiRefreshSQL {
	r := strings.NewReplacer("{t}", t, "{h}", h, "{now}", c.now, "{live_after}", c.liveAfter,
		"{plus_ttl}", strings.Replace(c.plus, "?", "{ttl}", 1))
	// A holder is live until the clock bound after its lease ends (see
	// newMultiSQL): a lease in doubt is still its holder's, so it is
	// extended too.
	live := `h.name = {t}.name AND h.expires > {live_after}`
	return multiRefreshSQL{
		numbered: numbered,
		lock:     r.Replace(`SELECT name FROM {t} WHERE name IN ({names}) ORDER BY name FOR UPDATE`),
		extend:   r.Replace(`UPDATE {h} SET expires = {plus_ttl}, delay = {delay} WHERE name IN ({names}) AND ({match}) AND expires > {live_after}`),
		held:     r.Replace(`SELECT name, owner, fence FROM {h} WHERE name IN ({names}) AND ({match}) AND expires > {now}`),
		sum: r.Replace(`UPDATE {t} SET
	` + summary(live) + `
WHERE name IN ({names})`),
	}
}

// multiBatch is one batch's statements, filled, and their arguments.
type multiBatch struct {
	lock, extend, held string
	names, extendArgs  []any // the names; the TTL and delay cases', names' and matches' arguments
	matchArgs          []any // the names' and matches' arguments
}

// batch fills the templates for ls. The holders match by row values,
// (name, owner, fence) for a lease with a token, (name, owner) for one
// without; the TTL (with the lock-delay) and the delay are each one
// parameter when every lease of the batch has the same, as a Locker's
// usually do, else a CASE by holder: each lease gets its own.
func (m *multiRefreshSQL) batch(ls []driver.Lease) multiBatch {
	var b multiBatch
	var names strings.Builder
	var owned, fenced []string
	var ownedArgs, fencedArgs []any
	for i, l := range ls {
		if i > 0 {
			names.WriteString(", ")
		}
		names.WriteString("?")
		b.names = append(b.names, l.Name)
		if l.Fence == 0 {
			owned = append(owned, "(?, ?)")
			ownedArgs = append(ownedArgs, l.Name, l.Owner)
			continue
		}
		fenced = append(fenced, "(?, ?, ?)")
		fencedArgs = append(fencedArgs, l.Name, l.Owner, int64(l.Fence))
	}
	var match []string
	if len(owned) > 0 {
		match = append(match, "(name, owner) IN ("+strings.Join(owned, ", ")+")")
	}
	if len(fenced) > 0 {
		match = append(match, "(name, owner, fence) IN ("+strings.Join(fenced, ", ")+")")
	}
	ttl, ttlArgs := m.perLease(ls, leaseUs)
	delay, delayArgs := m.perLease(ls, func(l driver.Lease) int64 { return micros(l.Delay) })
	fill := strings.NewReplacer("{names}", names.String(), "{match}", strings.Join(match, " OR "), "{ttl}", ttl, "{delay}", delay)
	b.lock, b.extend, b.held = m.filled(fill, m.lock), m.filled(fill, m.extend), m.filled(fill, m.held)
	if m.returning {
		b.extend += " RETURNING name, owner, fence"
	}
	b.matchArgs = append(append(append([]any{}, b.names...), ownedArgs...), fencedArgs...)
	b.extendArgs = append(append(ttlArgs, delayArgs...), b.matchArgs...)
	return b
}

// perLease returns the expression of the leases' value of us (µs) and its
// arguments: one parameter if they all have the same, else a CASE by
// holder.
func (m *multiRefreshSQL) perLease(ls []driver.Lease, us func(driver.Lease) int64) (string, []any) {
	param := "?"
	if m.numbered {
		param = "?::bigint"
	}
	same := true
	for _, l := range ls {
		same = same && us(l) == us(ls[0])
	}
	if same {
		return param, []any{us(ls[0])}
	}
	var b strings.Builder
	var args []any
	b.WriteString("(CASE")
	for _, l := range ls {
		b.WriteString(" WHEN name = ? AND owner = ? THEN " + param)
		args = append(args, l.Name, l.Owner, us(l))
	}
	b.WriteString(" END)")
	return b.String(), args
}

// filled is template s filled by fill, its parameters numbered on
// PostgreSQL; "" stays "".
func (m *multiRefreshSQL) filled(fill *strings.Replacer, s string) string {
	if s == "" {
		return ""
	}
	s = fill.Replace(s)
	if m.numbered {
		s = dollarParams(s)
	}
	return s
}

// sumOf fills the summary statement for names.
func (m *multiRefreshSQL) sumOf(names []any) string {
	return m.filled(strings.NewReplacer("{names}", strings.Repeat(", ?", len(names))[2:]), m.sum)
}

// refreshMulti extends, in one transaction, the shared holds and permits
// of ls that their owners still hold (with the lease's token, unless 0),
// then the summaries of their names' rows. The transaction first locks
// the rows of ls's names, in name order, as every step of a shared hold
// or permit locks its name's row before it reads the holders table. It
// returns the token of each lease extended.
func (d *sqlDriver) refreshMulti(ctx context.Context, ls []driver.Lease) (map[leaseKey]uint64, error) {
	m := &d.q.multi.refresh
	b := m.batch(ls)
	var held map[leaseKey]uint64
	err := d.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		held = nil
		if b.lock != "" {
			rows, err := tx.QueryContext(ctx, b.lock, b.names...)
			if err != nil {
				return false, err
			}
			if err := rows.Close(); err != nil {
				return false, err
			}
		}
		h, err := extendHolders(ctx, tx, m.returning, b)
		if err != nil || len(h) == 0 {
			return false, err
		}
		var names []any
		for k := range h {
			names = append(names, k.name)
		}
		if _, err := tx.ExecContext(ctx, m.sumOf(names), names...); err != nil {
			return false, err
		}
		held = h
		return true, nil
	})
	return held, err
}

// extendHolders runs b's extension and returns the holders it extended:
// those the statement returns, or (without returning) the live holders
// that b's matches find after it, which are exactly the ones it extended
// since only their owners extend them.
func extendHolders(ctx context.Context, tx *sql.Tx, returning bool, b multiBatch) (map[leaseKey]uint64, error) {
	if returning {
		rows, err := tx.QueryContext(ctx, b.extend, b.extendArgs...)
		if err != nil {
			return nil, err
		}
		return heldSet(rows)
	}
	if _, err := tx.ExecContext(ctx, b.extend, b.extendArgs...); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, b.held, b.matchArgs...)
	if err != nil {
		return nil, err
	}
	return heldSet(rows)
}
