// Package sqllock is the dlock backend for relational databases: MySQL and
// MariaDB (github.com/go-sql-driver/mysql), PostgreSQL
// (github.com/jackc/pgx/v5/stdlib) and SQLite (modernc.org/sqlite), through
// the user's own *sql.DB.
//
// Locks live in one lease table (Options.Table, DefaultTable by default),
// created on first use by each Locker with CREATE TABLE IF NOT EXISTS, or
// ahead of time by Migrate (with Options.NoMigrate, or migrate=false in a
// store URL, a Locker creates nothing). Names and owners are always bound
// as parameters, never spliced into SQL text; the table name is validated
// as a plain identifier.
//
// The administrator's view is the Locker's: Locker.Inspect lists holders
// with their lease left by the database's clock, Locker.ForceRelease
// frees a name whatever its owner.
//
// # Drivers
//
// The package imports github.com/go-sql-driver/mysql and
// github.com/jackc/pgx/v5, so importing it registers the database/sql
// drivers "mysql" and "pgx". It needs them beyond database/sql: to build
// data source names from store URLs (dlock.Open), to tell a deadlock or a
// missing table from other errors by their codes, and, on PostgreSQL, to
// open the listening connection with the pool's settings (see Waiting).
// It does not import a SQLite driver, the largest of the three: a program
// that opens sqlite:// URLs, or passes New a SQLite *sql.DB, imports
// modernc.org/sqlite itself (the dlock command does).
//
// # Steps
//
// Every step is decided by one atomic statement that compares the owner
// and measures leases by the database's own clock (MySQL
// UTC_TIMESTAMP(6), PostgreSQL clock_timestamp(), SQLite julianday('now')),
// never the client's:
//
//   - acquire is an upsert that takes the row if it is free (empty owner),
//     expired, or already the caller's (a retry whose reply was lost:
//     extended, same token). MySQL cannot return the outcome of an upsert,
//     so a primary-key SELECT follows it; it reports the lock taken only
//     if the row shows the caller's owner with an unexpired lease.
//   - refresh extends, in one statement per 200 leases, every row whose
//     owner matches and whose lease has not run out (PostgreSQL UPDATE ...
//     FROM (VALUES ...) RETURNING, SQLite the same; MySQL an UPDATE then a
//     SELECT of the rows still held by the caller, which were exactly the
//     rows the UPDATE extended since only their owner can extend them).
//   - release clears the owner of a row the caller holds, keeping the row
//     and its token; on PostgreSQL the same statement calls pg_notify.
//
// A lock not acquired reports the holder's remaining lease as computed by
// the database, so waiters never sleep past it. Steps that the database
// rolls back as a deadlock (MySQL) or serialization failure (PostgreSQL)
// are run again, up to 5 times.
//
// Every step honours its context. When renewals cannot reach the database
// in time, the Lock's Done closes before the lease can have ended there; a
// renewal that was sent but whose answer never came may still be applied
// later, which only keeps the name unavailable for one more lease.
//
// # Schema
//
// MySQL and MariaDB (names are bytes: 'A' and 'a', 'x' and 'x ' differ):
//
//	CREATE TABLE IF NOT EXISTS dlock_locks (
//		name    VARBINARY(255) NOT NULL PRIMARY KEY,
//		owner   VARBINARY(255) NOT NULL,  -- '' when free
//		fence   BIGINT NOT NULL,          -- last token issued
//		expires DATETIME(6) NOT NULL,     -- UTC
//		meta    VARBINARY(1024) NOT NULL DEFAULT '',  -- dlock.WithMetadata
//		KEY dlock_locks_expires (expires)
//	) ENGINE=InnoDB
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS dlock_locks (
//		name    text COLLATE "C" PRIMARY KEY,
//		owner   text NOT NULL,
//		fence   bigint NOT NULL,
//		expires timestamptz NOT NULL,
//		meta    text NOT NULL DEFAULT ''
//	);
//	CREATE INDEX IF NOT EXISTS dlock_locks_expires ON dlock_locks (expires);
//
// SQLite (TEXT with the default BINARY collation):
//
//	CREATE TABLE IF NOT EXISTS dlock_locks (
//		name    TEXT NOT NULL PRIMARY KEY,
//		owner   TEXT NOT NULL,
//		fence   INTEGER NOT NULL,
//		expires INTEGER NOT NULL, -- microseconds since 1970, UTC
//		meta    TEXT NOT NULL DEFAULT ''
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS dlock_locks_expires ON dlock_locks (expires);
//
// # Fencing tokens
//
// A row is taken with token max(database clock in microseconds since 1970,
// previous token + 1). Released and expired rows are kept, so a name's
// counter continues across release and re-acquisition even if the clock
// steps back. Rows idle (free or expired) for longer than
// Options.IdleRetention are deleted, at most 100 at a time, by a Locker's
// acquire at most once a minute; so the table holds the held
// names plus those used within the retention. A name whose row was
// deleted starts again from the clock, which is past its last token as
// long as the database's clock has not stepped back by more than
// IdleRetention (an hour by default) since that token was issued. This
// was chosen over a "floor" row holding the largest deleted token because
// reading such a row without locking races with a concurrent cleanup, and
// locking it on every acquire would serialize all acquisitions.
//
// # Waiting
//
// PostgreSQL wakes waiters with LISTEN/NOTIFY: release notifies channel
// Options.Table with the name as payload, in the same statement, and each
// Locker listens on one connection of its own, opened on the first wait
// with the settings of the *sql.DB's connections (read once through
// Conn.Raw; the listening connection itself stays outside the pool, where
// holding it would block Stmt.Close on the pool). If that connection
// breaks, the Locker reconnects with backoff (up to 2 s apart, until
// Close) and then wakes all its waiters, since notifications may have
// been lost; a waiter that begins to wait while the connection is down
// is kept and woken the same way, not left to poll. MySQL and SQLite
// have no such mechanism: waiters poll with jittered backoff, at most
// Options.MaxRetryInterval apart and never past the holder's remaining
// lease, and waiters in the same Locker are woken directly on release.
//
// # SQLite
//
// Several processes on one host can share a database file. Open it in WAL
// mode with a busy timeout, for example with modernc.org/sqlite:
//
//	sql.Open("sqlite", "file:/path/locks.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
//
// Without busy_timeout, contending processes get "database is locked"
// errors instead of waiting their turn. synchronous(NORMAL) is optional
// and about four times faster: in WAL mode a power loss may then undo the
// last commits, but every holder on the host died with it, and tokens
// stay increasing since they follow the clock.
//
// The database's clock is then the host's wall clock. Every step is a
// single statement, which takes SQLite's write lock for its whole run, so
// two processes cannot both take a name.
//
// # Connections
//
// A Locker prepares its statements once (database/sql prepares them again
// on each connection of the pool that runs them), so that each step is one
// round trip even with drivers that would prepare, execute and close every
// parameterized query. On PostgreSQL a Locker also opens one connection
// of its own for LISTEN, on its first wait, and keeps it until Close.
//
// # Compatibility
//
// The MySQL dialect is tested on MariaDB; it uses VALUES() in ON DUPLICATE
// KEY UPDATE, which MySQL 8.0.20 and later deprecate but still accept.
// The PostgreSQL dialect needs PostgreSQL 9.5 or later and is tested on 15;
// the SQLite dialect needs SQLite 3.35 (RETURNING, UPDATE FROM).
package sqllock
