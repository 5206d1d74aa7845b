package sqllock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// Lock.Extend, lock-delays and Locker.Resume (driver.Extender,
// driver.LockDelayer, driver.Resumer).
//
// A lease's row (or holders row) keeps its lock-delay in the column
// delay (µs) and its expires is the end of the lease plus that delay, so
// every step that reads expires (acquire, the clock bound, cleanup)
// keeps the name for the delay as it would for the lease; the row's ttl
// column, the takeover's StampTTL, counts the delay too. Inspect reports
// a holder whose lease, expires less delay, has ended as Delayed.

// leaseUs is how long, in µs, l keeps its name from now: its TTL and its
// lock-delay.
func leaseUs(l driver.Lease) int64 { return micros(l.TTL + l.Delay) }

// Extend implements driver.Extender: it is the refresh of one lease,
// which sets a lease to its own TTL (and delay) from now, whatever it
// was, and writes them into the row (one statement for an exclusive
// lease; for a shared hold or permit the refresh's transaction).
func (d *sqlDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// LockDelay implements driver.LockDelayer.
func (d *sqlDriver) LockDelay() bool { return true }

// Scope implements driver.Resumer: the dialect and the lease table. The
// database is not part of it (a Locker knows its *sql.DB, not what it
// points to), so a token of another database with the same table passes
// the scope check and its Resume fails with ErrNotHeld, since no row
// there has its owner.
func (d *sqlDriver) Scope() string { return d.dialect.String() + "/" + d.table }

// Resume implements driver.Resumer: for an exclusive lease one UPDATE of
// the name's row where name, owner and token match; for a shared hold or
// a permit one transaction that locks the name's row, updates the holder's
// row the same way and rewrites the name's summary.
func (d *sqlDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	if err := d.ensure(ctx); err != nil {
		return driver.Result{}, fmt.Errorf("sqllock: resume %q: %w", from.Name, err)
	}
	var (
		ok  bool
		err error
	)
	if from.Shared || from.Limit > 0 {
		ok, err = retry(ctx, func() (bool, error) { return d.resumeMulti(ctx, from, to) })
	} else {
		ok, err = retry(ctx, func() (bool, error) {
			return affected(d.stmts.ExecContext(ctx, d.q.multi.resumeRow, resumeArgs(from, to, micros(to.TTL+to.Delay))...))
		})
	}
	switch {
	case err != nil:
		return driver.Result{}, fmt.Errorf("sqllock: resume %q: %w", from.Name, d.explain(err))
	case !ok:
		return driver.Result{}, fmt.Errorf("sqllock: resume %q: %w", from.Name, driver.ErrNotHeld)
	}
	return driver.Result{Acquired: true, Fence: from.Fence}, nil
}

// resumeArgs are the arguments of multiSQL's resume statements: the new
// owner, its metadata and its lease (TTL and delay, in µs); then ttl, the
// lease table's ttl column (given for resumeRow only); then the new
// delay and the hold's name, old owner and token.
func resumeArgs(from, to driver.Lease, ttl ...any) []any {
	args := []any{to.Owner, to.Metadata, leaseUs(to)}
	args = append(args, ttl...)
	return append(args, micros(to.Delay), from.Name, from.Owner, int64(from.Fence))
}

// resumeMulti moves a shared hold or permit to.Owner in a transaction
// that holds the name's row, as every multi-holder step does, and
// rewrites the row's summary (its expires may change with the new
// lease). It reports whether from.Owner held it with from.Fence in
// from's mode.
func (d *sqlDriver) resumeMulti(ctx context.Context, from, to driver.Lease) (bool, error) {
	m := &d.q.multi
	var moved bool
	err := d.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		s, err := d.lockRow(ctx, tx, from.Name)
		if err != nil {
			return false, err
		}
		args := append(resumeArgs(from, to), from.Shared, from.Limit)
		if moved, err = affected(tx.ExecContext(ctx, m.resumeHolder, args...)); err != nil || !moved {
			return false, err
		}
		_, err = tx.ExecContext(ctx, m.sum, s.fence, "", from.Name, from.Name, from.Name, from.Name)
		return err == nil, err
	})
	return moved, err
}

var (
	_ driver.Extender    = (*sqlDriver)(nil)
	_ driver.LockDelayer = (*sqlDriver)(nil)
	_ driver.Resumer     = (*sqlDriver)(nil)
)
