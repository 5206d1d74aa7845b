package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
)

// CheckHeld makes the caller's transaction tx, on the database that holds
// the lease table (table, "" for DefaultTable, of a Locker of dialect),
// conditional on still holding k: it locks the name's row for the rest of
// tx (FOR SHARE on PostgreSQL, LOCK IN SHARE MODE on MySQL) and returns
// nil if k's owner holds the name there with k's fencing token and a
// lease that has not run out by the database's clock (a lock-delay's part
// does not count), or an error wrapping dlock.ErrNotHeld.
//
// Run the business writes in tx after it and commit: while tx holds the
// row, no step of any Locker can change it (a takeover, a release, a
// renewal, a Resume wait for tx to end), so the lock is still held at
// commit, whatever the holder's renewals do meanwhile. On SQLite, which
// has one writer at a time, the check is a read of tx's snapshot: a tx
// that writes after it commits only if no other write came between (a
// WAL database refuses the write with SQLITE_BUSY otherwise). It costs
// one statement, two for a shared hold or a permit. A nil k, a dialect
// that is unknown and a table that is not a plain identifier are errors
// wrapping dlock.ErrInvalid. The caller rolls tx back on an error.
func CheckHeld(ctx context.Context, tx *sql.Tx, dialect Dialect, table string, k *dlock.Lock) error {
	if table == "" {
		table = DefaultTable
	}
	q, ok := heldQueries(dialect, table)
	switch {
	case k == nil || tx == nil:
		return fmt.Errorf("sqllock: check held: nil lock or transaction: %w", dlock.ErrInvalid)
	case validTable(table) != nil:
		return fmt.Errorf("sqllock: check held: %w", validTable(table))
	case !ok:
		return fmt.Errorf("sqllock: check held: unknown dialect %d: %w", int(dialect), dlock.ErrInvalid)
	}
	var mine, multi bool
	err := tx.QueryRowContext(ctx, q.row, k.Owner(), int64(k.Fence()), k.Name()).Scan(&mine, &multi)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqllock: check held %q: %w", k.Name(), dlock.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("sqllock: check held %q: %w", k.Name(), storeError(err))
	case !mine && multi:
		var n int
		if err := tx.QueryRowContext(ctx, q.holder, k.Name(), k.Owner(), int64(k.Fence())).Scan(&n); err != nil {
			return fmt.Errorf("sqllock: check held %q: %w", k.Name(), storeError(err))
		}
		mine = n > 0
	}
	if !mine {
		return fmt.Errorf("sqllock: check held %q: %w", k.Name(), dlock.ErrNotHeld)
	}
	return nil
}

// heldSQL are CheckHeld's statements: row locks name's row and says
// whether owner holds it exclusively with fence and a live lease, and
// whether shared holders or permits hold it; holder counts the live
// shared holds or permits of name, owner and fence.
type heldSQL struct{ row, holder string }

// heldQueries returns CheckHeld's statements for dialect and table.
func heldQueries(dialect Dialect, table string) (heldSQL, bool) {
	var live, lock, quote string
	switch dialect {
	case PostgreSQL:
		quote, live, lock = `"`, `expires > clock_timestamp() + delay * interval '1 microsecond'`, ` FOR SHARE`
	case MySQL:
		quote, live, lock = "`", `TIMESTAMPADD(MICROSECOND, -delay, expires) > `+mysqlNow, ` LOCK IN SHARE MODE`
	case SQLite:
		quote, live = `"`, `expires - delay > `+sqliteNow
	default:
		return heldSQL{}, false
	}
	r := strings.NewReplacer("{t}", quote+table+quote, "{h}", quote+holdersTable(table)+quote, "{live}", live, "{lock}", lock)
	q := heldSQL{
		row:    r.Replace(`SELECT owner = ? AND fence = ? AND {live}, owner = '*' FROM {t} WHERE name = ?{lock}`),
		holder: r.Replace(`SELECT COUNT(*) FROM {h} WHERE name = ? AND owner = ? AND fence = ? AND {live}{lock}`),
	}
	if dialect == PostgreSQL {
		// PostgreSQL locks no rows of an aggregate: the name's row,
		// locked by row, keeps every step of its holders out, and a
		// statement under READ COMMITTED reads what committed before it.
		q.row, q.holder = dollarParams(q.row), dollarParams(strings.TrimSuffix(q.holder, lock))
	}
	return q, true
}
