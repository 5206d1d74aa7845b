package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/dlock-go/dlock/driver"
)

// Migrate creates the lease table (and its index) on db if it does not
// exist, as each Locker otherwise does on first use. An empty table means
// DefaultTable.
func Migrate(ctx context.Context, db *sql.DB, dialect Dialect, table string) error {
	q, err := prepare(db, dialect, table, driver.DefaultClockBound)
	if err != nil {
		return fmt.Errorf("sqllock: migrate: %w", err)
	}
	if err := retryErr(ctx, func() error { return q.migrate(ctx, db) }); err != nil {
		return fmt.Errorf("sqllock: migrate: %w", storeError(err))
	}
	return nil
}

// Inspect implements driver.Inspector (Locker.Inspect, "dlock status"):
// the holders of names, or of every held name, ordered by name (by bytes
// on MySQL and SQLite, by the "C" collation on PostgreSQL), with their
// remaining leases by the database's clock. With Options.NoMigrate a
// missing table holds nothing.
func (d *sqlDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	if err := d.ensure(ctx); err != nil {
		return nil, fmt.Errorf("sqllock: inspect: %w", err)
	}
	hs, err := d.q.holders(ctx, d.db)
	switch {
	case err != nil && d.noMigrate && missingTable(err) && !d.oldTable(ctx, err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("sqllock: inspect: %w", d.explain(err))
	}
	if len(names) == 0 {
		return hs, nil
	}
	return slices.DeleteFunc(hs, func(h driver.Holder) bool { return !slices.Contains(names, h.Name) }), nil
}

// ForceRelease implements driver.ForceReleaser (Locker.ForceRelease,
// "dlock release --force"): it frees name whatever its owner and, on
// PostgreSQL, notifies its waiters. The row is kept, free, so the name's
// fencing tokens keep increasing. With Options.NoMigrate a missing table
// holds nothing.
func (d *sqlDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := d.ensure(ctx); err != nil {
		return false, fmt.Errorf("sqllock: force release %q: %w", name, err)
	}
	ok, err := retry(ctx, func() (bool, error) {
		var held bool
		err := d.inTx(ctx, func(tx *sql.Tx) (bool, error) {
			var err error
			if held, err = d.q.forceRelease(ctx, tx, name); err != nil {
				return false, err
			}
			_, err = tx.ExecContext(ctx, d.q.multi.force, name)
			return err == nil, err
		})
		return held, err
	})
	switch {
	case err != nil && d.noMigrate && missingTable(err) && !d.oldTable(ctx, err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqllock: force release %q: %w", name, d.explain(err))
	}
	return ok, nil
}
