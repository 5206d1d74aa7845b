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
//     expired more than the clock bound ago (see Clock steps), already
//     the caller's (a retry whose reply was lost: extended, same token),
//     or in doubt with the stamp the caller's takeover names. MySQL
//     cannot return the outcome of an upsert, so a primary-key SELECT
//     follows it; it reports the lock taken only if the row shows the
//     caller's owner with an unexpired lease. (On MySQL an acquire with a
//     takeover first runs an UPDATE of its own that compares the stamp;
//     the upsert runs only if that took nothing.)
//   - refresh extends, in one statement per 200 leases, every row whose
//     owner (and token, when the core gives one) matches and whose lease
//     has not run out, or ran out less than the clock bound ago (PostgreSQL UPDATE ...
//     FROM (VALUES ...) RETURNING, SQLite the same; MySQL an UPDATE then a
//     SELECT of the rows still held by the caller, which were exactly the
//     rows the UPDATE extended since only their owner can extend them).
//   - release clears the owner of a row the caller holds, keeping the row
//     and its token; on PostgreSQL the same statement calls pg_notify. A
//     release that finds nothing to free runs a second statement, which
//     takes out the caller's writer intent if it left one (see Writer
//     preference).
//
// Those statements are the whole cost of an exclusive lock (dlock's
// default mode): shared holds and semaphores add columns to its row but
// no statement to its steps.
//
// # Shared holds and semaphores
//
// Shared holds (dlock.Shared) and semaphore permits (dlock.WithLimit) are
// rows of a second table, the lease table's name with "_holders" appended
// (for a name longer than 55 bytes: a prefix of it, a hash and
// "_holders"), one row per holder with its own owner, token, lease and
// metadata. The name's row in the lease table summarises them: its owner
// is then "*" (never a lease's owner), its expires the latest lease of
// any holder, lim the semaphore's limit (0 for shared holds), fence the
// last token issued. So an exclusive acquire still decides from that row
// alone, in its one statement: it fails while a holder's lease runs, and
// it reports the mode, so that a lock asked for a name held as a
// semaphore gets an error wrapping driver.ErrMode. (A statement that read
// the holders table too would not be safe on PostgreSQL: under READ
// COMMITTED, a sub-select does not see a holder committed while the
// statement waited for the row's lock.)
//
// Each step of a shared hold or permit (acquire, refresh, release) is one
// transaction that begins by locking the name's row with an upsert
// (creating it if missing; on MySQL followed by a SELECT ... FOR UPDATE,
// in READ COMMITTED; on SQLite the upsert, a write, takes the database's
// write lock first). Under that lock it checks the mode, the exclusive
// holder, the writer's intent and the permits left, changes the holder's
// row, and rewrites the summary from the holders table. Expired holder
// rows of the name are deleted as it goes, and by the periodic cleanup.
//
// # Writer preference
//
// These stores do not queue waiters, and there is no FIFO order among
// them: whoever tries first after a release gets the name. What keeps a
// writer from starving behind a stream of readers is its intent: when a
// waiting exclusive Acquire finds the name held by shared holders, a
// second statement records its owner in the row's intent columns (one
// writer per name; a live intent of another writer is kept) for the
// lease's TTL, and every later attempt renews it. While a live intent is
// there, shared acquisitions by other owners fail (a waiting one keeps
// waiting); holders already in keep their holds. The writer's acquire
// clears the intent when it takes the name; a writer that gives up clears
// it through Release (the core calls it); a writer that dies leaves it to
// lapse after its TTL. Exclusive TryAcquire ignores intents, as it does
// not wait.
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
//		owner   VARBINARY(255) NOT NULL,  -- '' when free, '*' for shared holders or permits
//		fence   BIGINT NOT NULL,          -- last token issued
//		expires DATETIME(6) NOT NULL,     -- UTC
//		meta    VARBINARY(1024) NOT NULL DEFAULT '',  -- dlock.WithMetadata
//		lim     INT NOT NULL DEFAULT 0,   -- the semaphore's limit while owner is '*'
//		intent  VARBINARY(255) NOT NULL DEFAULT '',  -- a waiting writer's owner
//		intent_expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
//		KEY dlock_locks_expires (expires)
//	) ENGINE=InnoDB
//	CREATE TABLE IF NOT EXISTS dlock_locks_holders (
//		name    VARBINARY(255) NOT NULL,
//		owner   VARBINARY(255) NOT NULL,
//		fence   BIGINT NOT NULL,
//		expires DATETIME(6) NOT NULL,
//		meta    VARBINARY(1024) NOT NULL DEFAULT '',
//		shared  BOOLEAN NOT NULL,         -- a shared hold, else a permit
//		lim     INT NOT NULL,             -- the permit's semaphore limit, 0 for a shared hold
//		PRIMARY KEY (name, owner),
//		KEY dlock_locks_holders_expires (expires)
//	) ENGINE=InnoDB
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS dlock_locks (
//		name    text COLLATE "C" PRIMARY KEY,
//		owner   text NOT NULL,
//		fence   bigint NOT NULL,
//		expires timestamptz NOT NULL,
//		meta    text NOT NULL DEFAULT '',
//		lim     integer NOT NULL DEFAULT 0,
//		intent  text NOT NULL DEFAULT '',
//		intent_expires timestamptz NOT NULL DEFAULT 'epoch',
//		ttl     bigint NOT NULL DEFAULT 0
//	) WITH (fillfactor = 70);
//	CREATE TABLE IF NOT EXISTS dlock_locks_holders (
//		name    text COLLATE "C" NOT NULL,
//		owner   text NOT NULL,
//		fence   bigint NOT NULL,
//		expires timestamptz NOT NULL,
//		meta    text NOT NULL DEFAULT '',
//		shared  boolean NOT NULL,
//		lim     integer NOT NULL,
//		PRIMARY KEY (name, owner)
//	);
//	CREATE INDEX IF NOT EXISTS dlock_locks_holders_expires ON dlock_locks_holders (expires);
//
// SQLite (TEXT with the default BINARY collation):
//
//	CREATE TABLE IF NOT EXISTS dlock_locks (
//		name    TEXT NOT NULL PRIMARY KEY,
//		owner   TEXT NOT NULL,
//		fence   INTEGER NOT NULL,
//		expires INTEGER NOT NULL, -- microseconds since 1970, UTC
//		meta    TEXT NOT NULL DEFAULT '',
//		lim     INTEGER NOT NULL DEFAULT 0,
//		intent  TEXT NOT NULL DEFAULT '',
//		intent_expires INTEGER NOT NULL DEFAULT 0
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS dlock_locks_expires ON dlock_locks (expires);
//	CREATE TABLE IF NOT EXISTS dlock_locks_holders (
//		name    TEXT NOT NULL,
//		owner   TEXT NOT NULL,
//		fence   INTEGER NOT NULL,
//		expires INTEGER NOT NULL,
//		meta    TEXT NOT NULL DEFAULT '',
//		shared  INTEGER NOT NULL,
//		lim     INTEGER NOT NULL,
//		PRIMARY KEY (name, owner)
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS dlock_locks_holders_expires ON dlock_locks_holders (expires);
//
// With another Options.Table, every name above starts with the table's
// name instead of dlock_locks; where that would pass 63 bytes, the
// holders table and the indexes are named by a prefix of the table's
// name, a hash of it and the suffix, so that the database keeps every
// name whole.
//
// A lease table made by an earlier release (without lim, intent,
// intent_expires and ttl) is upgraded by Migrate, or by a Locker's first use,
// with ALTER TABLE ... ADD COLUMN for each missing column (looked up in
// information_schema, or pragma_table_info on SQLite, so a table that
// has them is not altered); locks held in it are kept.
//
// # Clock steps
//
// Leases are measured by the database's wall clock, which an operator or
// a time daemon may step. Options.ClockBound (clock_bound= in a URL; by
// default driver.DefaultClockBound, 10 s) is the largest step, forward or
// back, that a Locker's leases survive:
//
//   - An exclusive lease that the database's clock says ended more than
//     the bound ago is free, as any expired lease was before. One that
//     ended less than the bound ago is in doubt: a forward step may have
//     ended it while its holder still renews. Acquire does not take it.
//     For any exclusive holder, live or in doubt, it returns, with
//     driver.Result.Stamp, the row's owner, token and
//     expiry in microseconds ("owner|fence|expires"; every renewal,
//     release and change of holder changes it) and, as StampTTL, the
//     holder's TTL, stored in the row's ttl column (8 bytes). The core
//     calls Acquire again with that stamp as driver.Lease.Takeover once
//     it has seen it unchanged for StampTTL on its own monotonic clock;
//     the upsert takes the row if its stamp is still exactly that. A
//     holder whose lease is in doubt still renews and releases it. A row
//     written by an older dlock has ttl 0: it gets no stamp and waits
//     out the bound. A waiter sees the stamp while the holder is alive,
//     and looks again at least every third of the holder's TTL, so a
//     crashed holder's name is taken by a waiter between one TTL and 4/3
//     of a TTL after the holder's last renewal (about when its lease
//     ends), and by a Locker that arrives while it is in doubt about one
//     TTL after it arrived.
//   - A shared hold or a semaphore permit counts as live until the bound
//     after its lease ended (no takeover by observation): a crashed
//     reader or permit holder keeps writers, or a permit, out for up to
//     its TTL plus the bound. A shared acquire that finds an exclusive
//     lease in doubt waits the bound out too.
//   - IdleRetention is at least the bound, so no row in doubt is deleted,
//     and a token drawn from the clock after a step back by up to the
//     bound is above the tokens of rows deleted before it.
//   - Inspect shows holders in doubt with Remaining 0.
//
// The uncontended steps cost the same statements and round trips as
// without the bound: the bound and the takeover are parameters of the
// same statements.
//
// # Fencing tokens
//
// A row is taken with token max(database clock in microseconds since 1970,
// previous token + 1). Released and expired rows are kept, so a name's
// counter continues across release and re-acquisition even if the clock
// steps back. Rows idle (free or expired) for longer than
// Options.IdleRetention are deleted by the cleanups of Lockers'
// acquisitions (see What stays on the server); so the table holds the
// held names plus those used within the retention. A name whose row was
// deleted starts again from the clock, which is past its last token as
// long as the database's clock has not stepped back by more than
// IdleRetention (an hour by default) since that token was issued.
// Shared holds and permits draw their tokens from the same row, in the
// transaction that locks it (max(clock, row's fence + 1)), and store
// them with the holder: every new hold of a name, in any mode, gets a
// token above every token issued before for it. A row with a live
// writer's intent is not cleaned up. This
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
// is kept and woken the same way, not left to poll. Releasing a shared
// hold or a permit notifies too (in its transaction, sent at commit), as
// does a writer that gives up its intent.
//
// MySQL wakes waiters through its named locks (GET_LOCK, MySQL 5.7 or
// MariaDB 10.0.2 and later): while a Locker holds a name exclusively it
// also holds a named lock derived from it ("dlock:" and a hash of the
// database, the table and the name), taken after the row and released
// after the row is freed, on one connection; a waiter blocks in the
// server's queue for that named lock, on one connection per name waited
// on, and retries the table when it gets it (it releases it in the same
// statement). The table stays the only source of truth: a lost or
// spurious wake-up costs a wait or a retry, never safety. The connections
// are borrowed from the *sql.DB's pool: at most 32 per pool, a quarter of
// its SetMaxOpenConns limit if it has one, none below 4; waiters beyond
// that, and waiters of names held in shared mode or as a semaphore (which
// hold no named lock), poll.
//
// SQLite on Linux wakes waiters through files next to the database (see
// SQLite below). SQLite elsewhere has no such mechanism: waiters poll with
// jittered backoff, at most Options.MaxRetryInterval apart and never past
// the holder's remaining lease. On every dialect, waiters in the same
// Locker are woken
// directly on release.
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
// The database's clock is then the host's wall clock. Every exclusive
// step is a single statement, and every step of a shared hold or permit
// a transaction whose first statement writes; either takes SQLite's write
// lock for its whole run, so two processes cannot both take a name.
//
// On Linux, a release wakes the name's waiters in every process (and in
// the other Lockers of this one) through inotify: a waiting Locker
// creates the name's empty wake file in a directory next to the database
// (its path followed by "-wake", made on the first wait; the files are
// named by a hash of the table and the name, and stay for the next wait)
// and watches the directory; a release, after its commit, opens the file
// for writing and closes it. Each Locker wakes the one of its waiters
// that has waited longest (the others follow on later releases), so a
// release does not send every waiter on the host after SQLite's write
// lock at once, and each process has about the same chance at the name
// (one attempt per release), however many waiters it has. Observers
// (Locker.Observe) are told of acquisitions too, through a second file.
// The database stays the only source of truth: a lost wake-up costs a
// waiter latency (up to Options.MaxRetryInterval), never safety. An
// in-memory or temporary database has no file, and outside Linux there
// is no inotify: there waiters poll, as on MySQL.
//
// # Connections
//
// A Locker prepares its statements once (database/sql prepares them again
// on each connection of the pool that runs them), so that each step is one
// round trip even with drivers that would prepare, execute and close every
// parameterized query. On PostgreSQL a Locker also opens one connection
// of its own for LISTEN, on its first wait, and keeps it until Close. On
// MySQL a Locker borrows connections from the pool for wake-ups (see
// Waiting) and keeps up to two idle between uses, until Close.
//
// The pool that Open makes for a store URL holds at most max_conns
// connections (Options.MaxConns, DefaultMaxConns = 8 by default, 2 on
// SQLite), keeps
// as many idle so that each step reuses one instead of dialing, closes
// those idle for 5 minutes and replaces those older than 30 minutes. So
// a Locker of Open holds at most, on the server:
//
//   - PostgreSQL: max_conns + 1 (the LISTEN connection): 9 by default,
//     so ten processes fit in the default max_connections of 100 (3 of
//     them kept for superusers);
//   - MySQL and MariaDB: max_conns, wake-ups included (they borrow at
//     most a quarter of the pool, 2 by default): 8 by default, eighteen
//     processes in MariaDB's default max_connections of 151;
//   - SQLite: max_conns connections to the file, 2 by default
//     (DefaultSQLiteConns): SQLite has one writer at a time and turns the
//     others away to sleep in its busy handler, so a larger pool only
//     moves the queue out of the pool, which serves in order, into that
//     handler, which does not (a third of 128 goroutines in 4 processes
//     starting together timed out with 8 each).
//
// On MySQL, a statement cancelled by its context ends its connection on
// the client's side at once, but the server ends the session only when
// the statement does (a lock wait, for instance, up to
// innodb_lock_wait_timeout): for that long the server can count it
// beyond the bound.
//
// Acquisitions never take the whole pool: a Locker lets at most
// max_conns - 2 of its Acquire steps run at once (less the wake-ups'
// quarter on MySQL; one at least), so that two connections stay free for
// renewals and releases, which never queue behind waiters for a
// connection. A pool of two keeps one, a pool of one none. A Locker of
// New divides the caller's pool in the same way, by the
// SetMaxOpenConns it has when New is called; a pool without a bound is
// not divided (and is not bounded either: size it, with SetMaxIdleConns
// as large, so that connections are reused).
//
// After a failed dial, the pool of Open dials one connection at a time,
// each after a pause that starts at 50 ms and doubles to 2 s, with
// jitter, until a dial succeeds; a dial waits for its turn within the
// caller's context. So a server that is down or refuses connections (too
// many clients) sees a few attempts a second from each Locker rather than
// one per waiting goroutine, and Lockers that lost the server together do
// not come back in step. PostgreSQL's LISTEN connection reconnects with
// its own backoff, from 50 ms to 2 s.
//
// # What stays on the server
//
// Per name, while it is held: one row in the lease table (the name, the
// holder's owner, token, lease, TTL and metadata, and a writer's intent:
// some 100 bytes plus the name, the owner and the metadata, and an entry
// in each of its two indexes), and for shared holds and permits also one
// row per holder in the holders table (as large). On MySQL an exclusive
// holder also holds a named lock (GET_LOCK) on a connection of its
// Locker, released with the name; on PostgreSQL waiting adds nothing per
// name (one LISTEN per Locker).
//
// After release: the holder's row in the holders table is deleted by the
// release; the lease table's row is kept, free, so that its token counter
// survives (see Fencing tokens), until it has been idle (free or expired,
// and without a live writer's intent) for Options.IdleRetention (one hour
// by default, at least ClockBound). Then a cleanup deletes it: each
// Acquire of a Locker runs one at most once a minute (or once per
// IdleRetention, if shorter), deleting up to 100 idle rows of each table,
// and again on the next Acquire while it deletes full batches. So the
// tables hold the names held plus those used within IdleRetention (and
// the minute a cleanup may wait), whatever the rate of new names. Rows of
// holders that died are deleted by the next step on their name, or by a
// cleanup once idle for IdleRetention. Nothing is deleted while no
// Locker acquires: rows left by the last Locker stay until one does.
//
// # PostgreSQL: passwords, TLS and privileges
//
// A postgres:// URL carries the password as libpq's does
// (postgres://user:pass@host/db; the dlock command also reads
// $DLOCK_PASSWORD), and Open's errors never quote it. A wrong password, a
// connection pg_hba.conf rejects (or a missing client certificate), and a
// missing privilege are errors wrapping dlock.ErrDenied (SQLSTATE 28P01,
// 28000, 42501), at once: not a retry, not "not acquired".
//
// TLS is asked for in one of two ways, not both. libpq's sslmode,
// sslrootcert, sslcert and sslkey go to pgx as they are:
// sslmode=verify-full&sslrootcert=ca.pem checks the certificate's chain
// and the host's name, verify-ca the chain only, require encrypts without
// checking. Or the tls_ca, tls_cert, tls_key, tls_server_name and
// tls_insecure_skip_verify parameters that every dlock backend takes
// make TLS mandatory, with no fallback to a connection without it, and
// verified like verify-full (against tls_ca, or the system's authorities;
// the name tls_server_name, or the host); they need a TCP host, since
// PostgreSQL speaks no TLS on Unix sockets. Either way the LISTEN
// connection logs in like the pool's.
//
// A lock user needs, on the lease table and its holders table only:
//
//	GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_holders TO app;
//
// and USAGE on their schema (PUBLIC has it on public), with migrate=false
// in its URL (Options.NoMigrate), since it cannot create tables. Nothing
// else: no sequence (tokens come from the clock), no function beyond
// PUBLIC's (pg_notify), and LISTEN needs no privilege. DELETE on the lease
// table serves only the cleanup of idle rows: without it they stay.
// Migrate (or a Locker without NoMigrate) needs CREATE on the schema, and
// the tables' ownership to add the columns of a newer release, which the
// role that created them has:
//
//	GRANT CREATE ON SCHEMA public TO migrator;
//
// The grant is the trust boundary. Every step is owner-checked, so a
// neighbour with the same grant cannot, through dlock, take, refresh or
// release a lock it does not hold, nor free the name with a stale handle
// of its own. But the grant lets it read the owner column and UPDATE or
// DELETE any row, as Locker.ForceRelease does, which frees the name: the
// holder's Lock.Done closes at its next renewal (they run every TTL/3),
// and the next holder's fencing token is larger, so
// fenced writes stay safe. Services that must not free each other's
// locks get tables of their own (Options.Table) and grants on those.
//
// # MySQL access
//
// A mysql:// store URL (dlock.Open) speaks TLS when it carries tls=true
// (verified against the system's roots) or any of the parameters every
// backend shares (backend.TLSParams): tls_ca, tls_cert with tls_key,
// tls_server_name, tls_insecure_skip_verify. The server's certificate is
// verified unless tls_insecure_skip_verify=true asks otherwise, by name,
// and a connection never falls back to plaintext. The server's refusals
// (a wrong password, a user made to REQUIRE SSL or X509 that connected
// without, a missing GRANT: MySQL errors 1044, 1045, 1142, 1143, 1227,
// 1370, 1698 and 3159) are errors wrapping dlock.ErrDenied, returned at
// once by Open's connection check or by the step refused.
//
// A lock user needs these privileges, on the lease tables only (named
// locks take none), and opens with migrate=false (Options.NoMigrate),
// since creating the tables takes CREATE:
//
//	GRANT SELECT, INSERT, UPDATE, DELETE ON db.dlock_locks TO 'app'@'%';
//	GRANT SELECT, INSERT, UPDATE, DELETE ON db.dlock_locks_holders TO 'app'@'%';
//
// DELETE serves the cleanup of idle rows and the release of shared holds
// and permits; SELECT alone is enough for Locker.Inspect ("dlock
// status"). Migrate, run once by another user, needs CREATE and SELECT on
// the database (SELECT lets information_schema show it the columns it
// checks), and ALTER to upgrade a table made by an earlier release. The
// table GRANTs above name existing tables, so they follow Migrate:
//
//	GRANT CREATE, SELECT ON db.* TO 'migrator'@'%';
//
// Another client with the same grants, or the same account, cannot
// release, refresh or take a held lock through dlock without its owner
// string: every step compares the owner in its statement. Its grants let
// it write the rows directly, though: a DELETE or an UPDATE of a held row
// takes the lock from its holder, whose Lock then ends with dlock.ErrLost
// at its next renewal; after a DELETE the name's next token still follows
// the clock, but an UPDATE may set any owner, lease and token: tokens
// fence off stale holders, not writers of the table. Named locks take no
// privilege and any session may take one: a session that takes the named
// lock of a name (its key follows from the database, the table and the
// name) before the holder does keeps the holder out of it (the holder
// tries again, up to ten times a second, while it holds the name), so
// the name's waiters poll, at most Options.MaxRetryInterval late; it
// cannot release a named lock another session holds. A session of the
// same account may KILL the holder's connections (an account may kill
// its own sessions), which frees the named lock (a spurious wake-up) or
// fails a step under way (an error, as any dropped connection gives).
// None of this frees the lock itself: the table is the only source of
// truth.
//
// # Compatibility
//
// The MySQL dialect is tested on MariaDB; it uses VALUES() in ON DUPLICATE
// KEY UPDATE, which MySQL 8.0.20 and later deprecate but still accept.
// The PostgreSQL dialect needs PostgreSQL 9.5 or later and is tested on 15;
// the SQLite dialect needs SQLite 3.35 (RETURNING, UPDATE FROM).
package sqllock
