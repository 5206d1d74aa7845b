// Package sqllock is the dlock backend for relational databases: MySQL and
// MariaDB (github.com/go-sql-driver/mysql, with package sqllock/mysql),
// PostgreSQL (github.com/jackc/pgx/v5/stdlib, with package
// sqllock/postgres) and SQLite (modernc.org/sqlite), through the user's
// own *sql.DB.
//
// Locks live in one lease table (Options.Table, DefaultTable by default)
// and, for shared holds and semaphore permits, a holders table beside it,
// created on first use by each Locker with CREATE TABLE IF NOT EXISTS, or
// ahead of time by Migrate (with Options.NoMigrate, or migrate=false in a
// store URL, a Locker creates nothing). A table made by an earlier release
// is upgraded in place, keeping the locks held in it. Names and owners are
// always bound as parameters, never spliced into SQL text; the table name
// is validated as a plain identifier. The schemas, for tables made by
// hand, are in DESIGN.md in this package's directory.
//
// The package imports no database driver, so a program links only the
// one it uses. A program that uses PostgreSQL imports
// github.com/dlock-go/dlock/sqllock/postgres, which links pgx and
// registers its database/sql driver "pgx"; one that uses MySQL imports
// github.com/dlock-go/dlock/sqllock/mysql, which links go-sql-driver and
// registers "mysql". Without that import New and Migrate refuse the
// dialect with an error wrapping dlock.ErrInvalid that names it. A program
// that opens sqlite:// URLs, or passes New a SQLite *sql.DB, imports
// modernc.org/sqlite itself. Open a SQLite database in WAL mode with a
// busy timeout and a journal size limit, for example:
//
//	sql.Open("sqlite", "file:/path/locks.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=journal_size_limit(4194304)")
//
// A Locker on SQLite keeps the -wal file small under load: when it has
// grown past 8 MiB, a TRUNCATE checkpoint on a connection of the
// Locker's own copies it back and empties it (see DESIGN.md).
//
// # Store URLs
//
// These are registered with dlock.Open by the imports of sqllock/postgres,
// sqllock/mysql and sqllock itself:
//
//	postgres://user[:pass]@host[:port]/dbname   (or postgresql://; sqllock/postgres)
//	postgres:///dbname?host=/run/postgresql      (a Unix socket; sqllock/postgres)
//	mysql://user[:pass]@host[:port]/dbname      (sqllock/mysql)
//	sqlite:///absolute/path.db                  (sqllock)
//
// Every scheme takes table (Options.Table), migrate=false
// (Options.NoMigrate), clock_bound (Options.ClockBound, a Go duration such
// as 10s) and max_conns (Options.MaxConns). postgres:// also takes libpq's
// host, port, sslmode, sslrootcert, sslcert, sslkey, connect_timeout and
// application_name; postgres:// and mysql:// take the TLS parameters of
// backend.TLSParams (tls, tls_ca, tls_cert and tls_key, tls_server_name,
// tls_insecure_skip_verify), which make TLS mandatory and verified, with no
// fallback to plaintext (on PostgreSQL, not mixed with sslmode and its
// kin). Open's pool holds at most max_conns connections (DefaultMaxConns,
// 8, or DefaultSQLiteConns, 2, on SQLite).
//
// # Guarantees
//
//   - Every step (acquire, refresh, release) is one atomic, owner-checked
//     statement, or for a shared hold or permit one transaction, and leases
//     are measured by the database's clock, never the client's.
//   - Fencing tokens are max(database clock in µs, previous token + 1), kept
//     in the name's row across release, so they increase as long as the
//     database's clock does not step back by more than Options.IdleRetention
//     (an hour by default) while the row is gone.
//   - Leases and tokens survive a step of the database's clock of up to
//     Options.ClockBound (driver.DefaultClockBound, 10 s), forward or back.
//   - Shared holds (dlock.Shared) and semaphores (dlock.WithLimit) are
//     supported; a waiting writer's intent, recorded in the row, keeps later
//     readers from starving it.
//   - Waiters are woken: PostgreSQL by LISTEN/NOTIFY, MySQL and MariaDB by
//     named locks (GET_LOCK), SQLite on Linux by inotify on a wake file next
//     to the database; elsewhere they poll, at most Options.MaxRetryInterval
//     apart and never past the holder's lease.
//   - Lock.Extend is the refresh of one lease, which sets it to its new TTL
//     from now and records it in the row: one statement (two on MySQL, as
//     every refresh there), or for a shared hold or permit one transaction.
//   - Locker.Resume is one owner- and token-checked UPDATE of the name's
//     row (for a shared hold or permit, of the holder's row, in a
//     transaction that locks the name's row and rewrites its summary, 5
//     round trips; 10 on MySQL). The old handle learns of it at its next
//     renewal (ErrNotHeld, Done closes). On MySQL the resuming Locker
//     also ends the old Locker's wake-up connection, when its account may
//     (see DESIGN.md), so that waiters are woken by the new holder.
//     Tokens are scoped by dialect and table, not by database: a token of
//     another database with the same table is refused with ErrNotHeld.
//   - dlock.WithLockDelay keeps a name for the delay after its holder's
//     lease ran out, measured by the database's clock like the lease (a
//     step of that clock by up to ClockBound ends neither early); Inspect
//     reports the holder as Delayed meanwhile. Tables made by an earlier
//     release gain the column it needs (delay) on migration.
//   - CheckHeld makes the caller's own transaction, on the database that
//     holds the lease table, conditional on still holding a lock: it locks
//     the name's row until the transaction ends, so the lock is still held
//     when the business write commits.
//   - Acquisitions never take a whole bounded pool: two connections stay
//     free for renewals and releases. A refused login, TLS certificate or
//     grant gives an error wrapping dlock.ErrDenied at once; a full disk one
//     wrapping dlock.ErrNoSpace.
//
// # Limits
//
//   - Waiters are not queued: whoever tries first after a release gets the
//     name (only the writer's intent orders them).
//   - A crashed shared holder or permit holder keeps its place for up to its
//     TTL plus the clock bound.
//   - Idle rows stay for IdleRetention and are deleted only by the cleanups
//     of Lockers' acquisitions: nothing is deleted while no Locker acquires.
//   - On PostgreSQL a Locker holds one more connection, for LISTEN; on MySQL
//     a cancelled statement's session lives on the server until the
//     statement ends (up to innodb_lock_wait_timeout).
//   - SQLite locks exclude the processes of one host only, and SQLite has
//     one writer at a time.
//   - Anyone granted writes on the tables can rewrite or delete a held row:
//     the holder's Done then closes at its next renewal, and fencing tokens
//     fence off stale holders, not writers of the table. Give services that
//     must not free each other's locks tables of their own.
//   - The MySQL dialect is tested on MariaDB (named locks need MySQL 5.7 or
//     MariaDB 10.0.2); PostgreSQL needs 9.5 and is tested on 15; SQLite
//     needs 3.35.
//
// The least-privilege grants for each database are in the repository's
// docs/security.md.
//
// # Example
//
//	import _ "github.com/dlock-go/dlock/sqllock/postgres" // PostgreSQL, and driver "pgx"
//
//	db, err := sql.Open("pgx", "postgres://app@db.example.com/app")
//	if err != nil {
//		return err
//	}
//	locker, err := sqllock.New(db, sqllock.PostgreSQL, nil) // the Locker does not close db
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "migrations")
//
// FenceTable keeps values in a table that a stale lock holder cannot
// overwrite (see package fence).
//
// Design: the statements of each step, shared holds and writer preference,
// the schemas, clock steps, fencing tokens, wake-ups, connections, what
// stays on the server, and each database's access control are described in
// DESIGN.md in this package's directory (sqllock/DESIGN.md).
package sqllock
