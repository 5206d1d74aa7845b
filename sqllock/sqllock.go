package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

const (
	// DefaultTable is Options.Table's default.
	DefaultTable = "dlock_locks"

	// DefaultPollInterval is Options.MaxRetryInterval's default for MySQL
	// and SQLite, whose waiters poll (on MySQL, when no named lock wakes
	// them).
	DefaultPollInterval = 250 * time.Millisecond

	// DefaultIdleRetention is Options.IdleRetention's default.
	DefaultIdleRetention = time.Hour

	// cleanupInterval is how often, at most, a Locker deletes idle rows
	// (or once per Options.IdleRetention if that is shorter), unless the
	// last cleanup deleted a full batch.
	cleanupInterval = time.Minute

	// cleanupBatch bounds the rows one cleanup deletes.
	cleanupBatch = 100

	// refreshBatch bounds the leases one refresh statement carries.
	refreshBatch = 200
)

// Options configures a SQL Locker. A nil *Options means defaults.
type Options struct {
	// Table is the lease table's name: a plain identifier of letters,
	// digits and underscores, not starting with a digit, at most 63
	// bytes. On PostgreSQL it also names the NOTIFY channel.
	// Default: DefaultTable.
	Table string

	// MaxRetryInterval bounds how long a waiter waits before trying
	// again when nothing wakes it (a waiter never waits longer than the
	// holder's remaining lease either). Default: DefaultPollInterval for
	// MySQL and SQLite, driver.DefaultMaxRetryInterval for PostgreSQL.
	MaxRetryInterval time.Duration

	// IdleRetention is how long a free or expired row is kept before a
	// cleanup may delete it. Fencing tokens of a name whose row was
	// deleted stay increasing unless the database's clock steps back by
	// more than this. A value below ClockBound is raised to ClockBound,
	// so that no row still in doubt (see ClockBound) is deleted.
	// Default: DefaultIdleRetention.
	IdleRetention time.Duration

	// ClockBound is the largest step of the database's clock, forward or
	// back, that the Locker's leases survive. An exclusive lease that the
	// database's clock says ended less than ClockBound ago is in doubt:
	// it is not taken by an Acquire unless the waiter has seen the row
	// unchanged for the holder's TTL on its own monotonic clock (see
	// driver.Result.Stamp); one that ended longer ago is free. A shared
	// hold or a permit counts as live until ClockBound after its lease
	// ends by the database's clock. A negative value is an error
	// wrapping dlock.ErrInvalid. Default: driver.DefaultClockBound (also
	// when 0).
	ClockBound time.Duration

	// MaxConns bounds the connections of the pool that Open makes for a
	// store URL (its max_conns parameter), which keeps as many idle for
	// reuse. The Locker keeps two of them (one of a pool of two, none of
	// a pool of one) from its acquisitions, for renewals and releases;
	// on MySQL a quarter more serve as wake-ups of waiters. On PostgreSQL
	// the Locker also holds one connection of its own, outside the pool,
	// for LISTEN. A negative value is an error wrapping dlock.ErrInvalid.
	// New ignores MaxConns: the pool is the caller's, and its
	// SetMaxOpenConns, read when New is called, is what the Locker
	// divides between acquisitions and renewals in the same way (a pool
	// without a bound keeps nothing back). Default: DefaultMaxConns
	// (also when 0).
	MaxConns int

	// NoMigrate makes the Locker create no table: it expects the table
	// to exist (see Migrate). Acquiring on a missing table fails, and
	// Inspect and ForceRelease find nothing held there, so that a tool
	// which only reads ("dlock status") changes nothing in the database.
	// Default: false, the Locker creates the table on first use.
	NoMigrate bool
}

// New returns a Locker on the lease table of db, which must be opened
// with the driver for dialect. The Locker does not close db. A nil opts
// means defaults. A nil db, an unknown dialect or a table name that is not
// a plain identifier is an error wrapping dlock.ErrInvalid. New does not
// contact the database: the table is created on first use (unless
// Options.NoMigrate is set).
func New(db *sql.DB, dialect Dialect, opts *Options) (*dlock.Locker, error) {
	l, _, err := newLocker(db, dialect, opts, false)
	return l, err
}

// newLocker is New, also returning the driver under the Locker (for the
// test hook); with ownDB set (Open made db) the Locker's Close closes db.
func newLocker(db *sql.DB, dialect Dialect, opts *Options, ownDB bool) (*dlock.Locker, driver.Driver, error) {
	d, lopts, err := newDriver(db, dialect, opts, ownDB)
	if err != nil {
		return nil, nil, err
	}
	return dlock.NewLocker(d, lopts), d, nil
}

// newDriver returns the driver of newLocker and the Locker's options.
func newDriver(db *sql.DB, dialect Dialect, opts *Options, ownDB bool) (driver.Driver, driver.LockerOptions, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.IdleRetention <= 0 {
		o.IdleRetention = DefaultIdleRetention
	}
	if o.ClockBound < 0 {
		return nil, driver.LockerOptions{}, fmt.Errorf("sqllock: new: clock bound %v is negative: %w", o.ClockBound, dlock.ErrInvalid)
	}
	if o.ClockBound == 0 {
		o.ClockBound = driver.DefaultClockBound
	}
	if o.MaxConns < 0 {
		return nil, driver.LockerOptions{}, fmt.Errorf("sqllock: new: max conns %d is negative: %w", o.MaxConns, dlock.ErrInvalid)
	}
	o.IdleRetention = max(o.IdleRetention, o.ClockBound)
	if o.MaxRetryInterval <= 0 && dialect != PostgreSQL {
		o.MaxRetryInterval = DefaultPollInterval
	}
	q, err := prepare(db, dialect, o.Table, o.ClockBound)
	if err != nil {
		return nil, driver.LockerOptions{}, fmt.Errorf("sqllock: new: %w", err)
	}
	d := &sqlDriver{dialect: dialect, db: db, ownDB: ownDB, acquiring: acquireSlots(db, dialect), stmts: newStmtCache(db), q: q, table: o.Table, retention: o.IdleRetention,
		bound: o.ClockBound, noMigrate: o.NoMigrate}
	lopts := driver.LockerOptions{MaxRetryInterval: o.MaxRetryInterval}
	switch dialect {
	case PostgreSQL:
		if pg, _ := dialects.Lookup(dialect.String()); pg.Listen != nil {
			d.cancel = pg.Cancel
			return &pgDriver{sqlDriver: d, lis: pg.Listen(db, o.Table)}, lopts, nil
		}
	case SQLite:
		return newSQLiteDriver(d), lopts, nil
	case MySQL:
		return &mysqlDriver{sqlDriver: d, wk: newNamedLocks(db, o.Table, o.MaxRetryInterval)}, lopts, nil
	}
	return d, lopts, nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// prepare validates the arguments and returns dialect's statements for
// table ("" for DefaultTable) and the clock bound (see
// Options.ClockBound).
func prepare(db *sql.DB, dialect Dialect, table string, bound time.Duration) (*queries, error) {
	if table == "" {
		table = DefaultTable
	}
	if db == nil {
		return nil, fmt.Errorf("nil *sql.DB: %w", dlock.ErrInvalid)
	}
	if err := validTable(table); err != nil {
		return nil, err
	}
	build := builders[dialect]
	if build == nil {
		return nil, fmt.Errorf("unknown dialect %d: %w", int(dialect), dlock.ErrInvalid)
	}
	if err := linked(dialect); err != nil {
		return nil, err
	}
	return build(table, bound), nil
}

// validTable returns an error wrapping dlock.ErrInvalid unless table is a
// plain identifier.
func validTable(table string) error {
	if !identifier.MatchString(table) {
		return fmt.Errorf("table name %q is not a plain identifier: %w", table, dlock.ErrInvalid)
	}
	return nil
}

// sqlDriver implements driver.Driver for every dialect; pgDriver adds
// LISTEN/NOTIFY wake-ups.
type sqlDriver struct {
	errorKinds // Classify
	dialect    Dialect
	db         *sql.DB
	ownDB      bool          // made by Open: Close closes it
	acquiring  chan struct{} // bounds concurrent Acquire steps (see acquireSlots); nil: no bound
	stmts      *stmtCache    // db with this Locker's prepared statements
	table      string
	retention  time.Duration // Options.IdleRetention, at least bound
	bound      time.Duration // Options.ClockBound
	noMigrate  bool          // Options.NoMigrate
	q          *queries

	// cancel, if not nil, returns for a connection of db (as sql.Conn.Raw
	// gives it) the function that asks the server to cancel the
	// statement it runs, or nil if it has none; Acquire then waits for
	// the answer of a statement its caller gave up (see acquireAnswered).
	cancel func(driverConn any) func(context.Context) error

	mu          sync.Mutex
	migrated    bool          // the table is known to exist
	migrating   chan struct{} // closed when the migration under way ends; nil if none
	nextCleanup time.Time     // earliest time of the next cleanup
}

// ensure creates the table once per Locker, unless Options.NoMigrate is
// set; a failure is retried on the next call. One call migrates at a
// time and the others wait for it (within their ctx), so that a Locker's
// goroutines starting together on a new database do not all fight for
// its write lock with the same CREATE TABLE (on SQLite 4 processes of 32
// goroutines made no acquisition for 15 s that way). A refusal says that
// a lock user without the right to create tables needs NoMigrate.
func (d *sqlDriver) ensure(ctx context.Context) error {
	if d.noMigrate {
		return nil
	}
	for {
		d.mu.Lock()
		done, running := d.migrated, d.migrating
		if !done && running == nil {
			d.migrating = make(chan struct{})
		}
		d.mu.Unlock()
		switch {
		case done:
			return nil
		case running == nil:
			return d.migrate(ctx)
		}
		select {
		case <-running: // migrated, or failed: look again
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// migrate runs the migration for ensure, which made d.migrating, and
// records the outcome.
func (d *sqlDriver) migrate(ctx context.Context) error {
	err := retryErr(ctx, func() error { return d.q.migrate(ctx, d.db) })
	d.mu.Lock()
	d.migrated = err == nil
	close(d.migrating)
	d.migrating = nil
	d.mu.Unlock()
	if (errorKinds{}).Classify(err) == driver.ErrorDenied {
		return fmt.Errorf("a user without the right to create tables opens with migrate=false (Options.NoMigrate) once Migrate has made them: %w", err)
	}
	return err
}

// Acquire takes one of the Locker's acquisition slots first, so that
// renewals and releases find a connection whatever the acquirers hold.
func (d *sqlDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	leave, err := enter(ctx, d.acquiring)
	if err != nil {
		return driver.Result{}, fmt.Errorf("sqllock: acquire %q: wait for a connection: %w", l.Name, err)
	}
	defer leave()
	if err := d.ensure(ctx); err != nil {
		return driver.Result{}, fmt.Errorf("sqllock: acquire %q: %w", l.Name, err)
	}
	var res driver.Result
	if d.cancel != nil && ctx.Done() != nil {
		res, err = d.acquireAnswered(ctx, l)
	} else {
		res, err = d.acquireOn(ctx, d.stmts, l)
	}
	if err != nil {
		return driver.Result{}, fmt.Errorf("sqllock: acquire %q: %w", l.Name, d.explain(err))
	}
	d.maybeCleanup(ctx)
	return res, nil
}

// acquireOn runs the statements of Acquire on db: the Locker's pool, or
// one connection of it (see acquireAnswered).
func (d *sqlDriver) acquireOn(ctx context.Context, db stepDB, l driver.Lease) (driver.Result, error) {
	if l.Shared || l.Limit > 0 {
		return retry(ctx, func() (driver.Result, error) { return d.acquireMulti(ctx, db, l) })
	}
	return d.acquireExclusive(ctx, db, l)
}

// acquireExclusive is Acquire for an exclusive lease: one statement on the
// name's row, and a second only when shared holders keep a waiting writer
// out (to record its intent).
func (d *sqlDriver) acquireExclusive(ctx context.Context, db stepDB, l driver.Lease) (driver.Result, error) {
	o, err := retry(ctx, func() (outcome, error) { return d.q.acquire(ctx, db, l) })
	switch {
	case err != nil || o.Acquired || !o.multi:
		return o.Result, err
	case o.lim > 0:
		return driver.Result{}, fmt.Errorf("acquire as a lock: held as %s: %w", mode(o.lim), driver.ErrMode)
	case l.Waiting:
		o.Queued, err = retry(ctx, func() (bool, error) { return d.recordIntent(ctx, db, l) })
	}
	return o.Result, err
}

// maybeCleanup deletes a bounded number of idle rows if no cleanup of
// this Locker is due later (see cleanupInterval, or IdleRetention if
// shorter). A cleanup that deleted
// a full batch of either table is due again at once, on the next
// Acquire, so that deletions keep up with a Locker that uses more new
// names per interval than a batch holds. Errors are ignored: the next
// cleanup tries again.
func (d *sqlDriver) maybeCleanup(ctx context.Context) {
	now := time.Now()
	d.mu.Lock()
	due := !now.Before(d.nextCleanup)
	if due {
		d.nextCleanup = now.Add(min(cleanupInterval, d.retention))
	}
	d.mu.Unlock()
	if !due {
		return
	}
	rows, _ := retry(ctx, func() (int64, error) { return d.q.cleanup(ctx, d.stmts, d.retention, cleanupBatch) })
	holders, _ := retry(ctx, func() (int64, error) { return d.q.cleanupHolders(ctx, d.stmts, d.retention, cleanupBatch) })
	if rows >= cleanupBatch || holders >= cleanupBatch {
		d.mu.Lock()
		d.nextCleanup = time.Time{}
		d.mu.Unlock()
	}
}

// Refresh extends leases in batches of as many as refreshBatch: the
// exclusive ones in one statement per batch, the shared holds and permits
// in one transaction per batch (see refreshMulti).
func (d *sqlDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	var excl, multi []int // indexes in ls of the exclusive leases, and of the others
	for i, l := range ls {
		if l.Shared || l.Limit > 0 {
			multi = append(multi, i)
			continue
		}
		excl = append(excl, i)
	}
	refreshBatches(ls, excl, errs, func(chunk []driver.Lease) (map[leaseKey]uint64, error) {
		return retry(ctx, func() (map[leaseKey]uint64, error) { return d.q.refresh(ctx, d.stmts, chunk) })
	})
	refreshBatches(ls, multi, errs, func(chunk []driver.Lease) (map[leaseKey]uint64, error) {
		return retry(ctx, func() (map[leaseKey]uint64, error) { return d.refreshMulti(ctx, chunk) })
	})
	return errs
}

// refreshBatches runs refresh on the leases of ls at indexes idx, as many
// as refreshBatch at a time, and sets their errors in errs: a lease is
// held if refresh returned it with its token (any, if its Fence is 0).
func refreshBatches(ls []driver.Lease, idx []int, errs []error, refresh func([]driver.Lease) (map[leaseKey]uint64, error)) {
	for start := 0; start < len(idx); start += refreshBatch {
		part := idx[start:min(start+refreshBatch, len(idx))]
		chunk := make([]driver.Lease, len(part))
		for j, i := range part {
			chunk[j] = ls[i]
		}
		held, err := refresh(chunk)
		for j, l := range chunk {
			fence, ok := held[leaseKey{l.Name, l.Owner}]
			errs[part[j]] = refreshError(l, ok && (l.Fence == 0 || fence == l.Fence), err)
		}
	}
}

// refreshError is the error of refreshing l: nil if held, else err or
// one wrapping driver.ErrNotHeld.
func refreshError(l driver.Lease, held bool, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: refresh %q: %w", l.Name, err)
	case !held:
		return fmt.Errorf("sqllock: refresh %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
}

// Release frees l's hold. An exclusive lease that did not hold the name
// may have left a writer's intent (driver.Result.Queued): a second
// statement clears it.
func (d *sqlDriver) Release(ctx context.Context, l driver.Lease) error {
	var (
		ok  bool
		err error
	)
	if l.Shared || l.Limit > 0 {
		ok, err = retry(ctx, func() (bool, error) { return d.releaseMulti(ctx, l) })
	} else {
		ok, err = retry(ctx, func() (bool, error) { return d.q.release(ctx, d.stmts, l.Name, l.Owner) })
		if err == nil && !ok {
			err = retryErr(ctx, func() error { return d.clearIntent(ctx, l) })
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: release %q: %w", l.Name, err)
	case !ok:
		return fmt.Errorf("sqllock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
}

// MultiHolder implements driver.MultiHolder: shared holds and semaphores.
func (d *sqlDriver) MultiHolder() bool { return true }

// HonoursContext implements driver.ContextHonourer: database/sql and the
// drivers of every dialect end a call when its context ends.
func (d *sqlDriver) HonoursContext() bool { return true }

// Backend names the store for hooks: the dialect.
func (d *sqlDriver) Backend() string { return d.dialect.String() }

func (d *sqlDriver) Close() error {
	err := d.stmts.close()
	if d.ownDB {
		err = errors.Join(err, d.db.Close())
	}
	if err != nil {
		return fmt.Errorf("sqllock: close: %w", err)
	}
	return nil
}

// leaseKey identifies a lease in refresh results.
type leaseKey struct{ name, owner string }

// retryAttempts bounds how often a step rolled back by a deadlock is run
// again.
const retryAttempts = 5

// retry runs f again, a few times, while it fails with an error the
// database reports as a rolled-back transaction that is safe to retry
// (a MySQL deadlock, a PostgreSQL serialization failure, SQLite busy).
// Attempts after the first wait a little longer each time.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		if err == nil || attempt == retryAttempts || !retryable(err) || ctx.Err() != nil {
			return v, err
		}
		if !pause.For(ctx, retryBackoff(attempt)) {
			return v, err
		}
	}
}

// retryErr is retry for steps that return only an error.
func retryErr(ctx context.Context, f func() error) error {
	_, err := retry(ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// retryBackoff is the pause before attempt+1: 5 ms doubling, ±50% jitter,
// so processes that collided do not collide again in step.
func retryBackoff(attempt int) time.Duration {
	d := 5 * time.Millisecond << (attempt - 1)
	return d/2 + rand.N(d)
}

// oldTable reports whether err comes from a lease table created by an
// older dlock (see oldSchema): a missing holders table counts only if the
// lease table itself exists.
func (d *sqlDriver) oldTable(ctx context.Context, err error) bool {
	if !oldSchema(err, d.table) {
		return false
	}
	if !missingTable(err) {
		return true
	}
	_, probe := d.db.ExecContext(ctx, "SELECT 1 FROM "+d.table+" WHERE 1 = 0")
	return probe == nil
}

// explain adds to err, when it says the table is missing and this Locker
// does not create it or that it is an older dlock's, what to do about it,
// (a refusal by the database is the core's to mark: see errorKinds).
func (d *sqlDriver) explain(err error) error {
	if oldSchema(err, d.table) {
		return fmt.Errorf("table %s was created by an older dlock, without the columns or the table (%s) of this one (shared locks, semaphores, lock-delays); add them with Migrate (or open once without migrate=false): %w", d.table, holdersTable(d.table), err)
	}
	if d.noMigrate && missingTable(err) {
		return fmt.Errorf("table %s does not exist and is not created with migrate=false (Options.NoMigrate); create it with Migrate: %w", d.table, err)
	}
	return err
}

var (
	_ driver.Driver          = (*sqlDriver)(nil)
	_ driver.Inspector       = (*sqlDriver)(nil)
	_ driver.ForceReleaser   = (*sqlDriver)(nil)
	_ driver.ContextHonourer = (*sqlDriver)(nil)
	_ driver.MultiHolder     = (*sqlDriver)(nil)
	_ driver.Classifier      = (*sqlDriver)(nil)
)
