package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Holder describes a held lock, as Holders reports it.
type Holder struct {
	// Name is the lock's name.
	Name string
	// Owner is the holding acquisition's owner string.
	Owner string
	// Fence is the acquisition's fencing token.
	Fence uint64
	// Remaining is the lease left, by the database's clock.
	Remaining time.Duration
	// Metadata is what the holder passed to dlock.WithMetadata.
	Metadata string
}

// Migrate creates the lease table (and its index) on db if it does not
// exist, as each Locker otherwise does on first use. An empty table means
// DefaultTable.
func Migrate(ctx context.Context, db *sql.DB, dialect Dialect, table string) error {
	q, err := prepare(db, dialect, table)
	if err != nil {
		return fmt.Errorf("sqllock: migrate: %w", err)
	}
	if err := retryErr(ctx, func() error { return q.migrate(ctx, db) }); err != nil {
		return fmt.Errorf("sqllock: migrate: %w", err)
	}
	return nil
}

// ForceRelease frees the lock on name whatever its owner, as an
// administrator's override: the holder learns of it at its next renewal,
// when its Lock's Done closes, and until then it may still act as if it
// held the lock (which is what fencing tokens are for). On PostgreSQL it
// also wakes waiters. It returns an error wrapping dlock.ErrNotHeld if
// nobody held name. An empty table means DefaultTable.
//
// The lock's row is kept, free, so the name's fencing tokens keep
// increasing.
func ForceRelease(ctx context.Context, db *sql.DB, dialect Dialect, table, name string) error {
	if err := dlock.ValidateName(name); err != nil {
		return fmt.Errorf("sqllock: force release: %w", err)
	}
	q, err := prepare(db, dialect, table)
	if err != nil {
		return fmt.Errorf("sqllock: force release %q: %w", name, err)
	}
	ok, err := retry(ctx, func() (bool, error) { return q.forceRelease(ctx, db, name) })
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: force release %q: %w", name, err)
	case !ok:
		return fmt.Errorf("sqllock: force release %q: %w", name, dlock.ErrNotHeld)
	}
	return nil
}

// Holders returns the locks currently held in the table, ordered by name
// (by bytes on MySQL and SQLite, by the "C" collation on PostgreSQL), with
// their remaining leases by the database's clock. It fails if the table
// does not exist yet (see Migrate). An empty table means DefaultTable.
func Holders(ctx context.Context, db *sql.DB, dialect Dialect, table string) ([]Holder, error) {
	q, err := prepare(db, dialect, table)
	if err != nil {
		return nil, fmt.Errorf("sqllock: holders: %w", err)
	}
	hs, err := q.holders(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("sqllock: holders: %w", err)
	}
	return hs, nil
}

// Inspect implements driver.Inspector (Locker.Inspect, "dlock status"):
// the holders of names, or of every held name.
func (d *sqlDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	if err := d.ensure(ctx); err != nil {
		return nil, err
	}
	hs, err := d.q.holders(ctx, d.db)
	if err != nil {
		return nil, fmt.Errorf("sqllock: inspect: %w", err)
	}
	var out []driver.Holder
	for _, h := range hs {
		if len(names) == 0 || slices.Contains(names, h.Name) {
			out = append(out, driver.Holder(h))
		}
	}
	return out, nil
}

// ForceRelease implements driver.ForceReleaser (Locker.ForceRelease,
// "dlock release --force"), as the package-level ForceRelease does.
func (d *sqlDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := d.ensure(ctx); err != nil {
		return false, err
	}
	ok, err := retry(ctx, func() (bool, error) { return d.q.forceRelease(ctx, d.db, name) })
	if err != nil {
		return false, fmt.Errorf("sqllock: force release %q: %w", name, err)
	}
	return ok, nil
}
