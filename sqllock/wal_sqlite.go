package sqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/pause"
)

// SQLite's WAL kept small: SQLite resets its write-ahead log (writes
// from its start again) only when a writer begins after a checkpoint
// has copied every frame back to the database and no reader still reads
// from the log, and its automatic checkpoint is PASSIVE: it never waits.
// Under steady load from several processes some connection is nearly
// always inside a statement that began before the last commit, so the
// log is seldom reset and grows (checkpoint starvation, see
// sqlite.org/wal.html); the file never shrinks by itself, and a -wal
// file of hundreds of MB for a table of a thousand rows makes every read
// search a larger WAL index. So each Locker looks at the size of the
// -wal file after an acquisition, at most every walCheckInterval, in the
// background, and when it is larger than walTruncateSize runs a TRUNCATE
// checkpoint: it waits for the current writer, copies the log back, waits
// for the readers still in the log (writers queue behind it meanwhile),
// and truncates the file to zero bytes. Each wait is bounded by the busy
// timeout checkpointWait of the checkpoint's own connection; a checkpoint
// that runs out of it (SQLITE_BUSY) has still copied what it could, and
// the next look tries again. Open also sets journal_size_limit
// (walSizeLimit), so that a log SQLite resets by itself is cut back to
// that size.

const (
	// walTruncateSize is the size of the -wal file above which a Locker
	// checkpoints in TRUNCATE mode: twice the 1,000 pages of 4 KiB at
	// which SQLite's automatic checkpoint runs, so that a log that SQLite
	// resets by itself is left alone.
	walTruncateSize = 8 << 20

	// walSizeLimit is the journal_size_limit of Open's connections: the
	// size SQLite cuts a -wal file back to when it resets the log.
	walSizeLimit = 4 << 20

	// walCheckInterval is how often at most a Locker looks at the size
	// of the -wal file, after an acquisition.
	walCheckInterval = 100 * time.Millisecond

	// checkpointWait is the busy timeout of a TRUNCATE checkpoint: how
	// long it waits for the writer, and for the readers in the log, each.
	checkpointWait = 100 * time.Millisecond
)

// walKeeper is a Locker's side of keeping the -wal file small. Its
// checkpoints run on a connection of their own, outside the Locker's
// pool, opened on the first one and kept until the Locker closes: so
// they neither wait for the pool behind acquisitions that wait out their
// busy timeouts, nor take a connection that a renewal needs.
type walKeeper struct {
	db   *sql.DB                                   // the Locker's pool, whose driver opens conn
	file func(ctx context.Context) (string, error) // the database's file, or errNoFile

	ctx    context.Context // ends when the Locker closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the running look

	mu      sync.Mutex
	next    time.Time // earliest time of the next look
	running bool
	conn    *sql.DB // the checkpoints' connection; nil until the first
}

func newWALKeeper(db *sql.DB, file func(context.Context) (string, error)) *walKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	return &walKeeper{db: db, file: file, ctx: ctx, cancel: cancel}
}

// maybeCheck starts a look at the -wal file in the background unless
// one is running or the last began less than walCheckInterval ago.
func (w *walKeeper) maybeCheck() {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running || now.Before(w.next) || w.ctx.Err() != nil {
		return
	}
	w.running, w.next = true, now.Add(walCheckInterval)
	w.wg.Go(func() { // exits after one look, bounded by checkpointWait (thrice) and close
		defer func() {
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
		}()
		w.check(w.ctx) // errors ignored: the next look tries again
	})
}

// check checkpoints in TRUNCATE mode if the -wal file is larger than
// walTruncateSize. SQLite refuses a checkpoint at once, without its busy
// handler, while another one runs (as its automatic checkpoint does
// after nearly every commit to a long log), so check tries again every
// millisecond or two, for checkpointWait, until one truncates the log.
func (w *walKeeper) check(ctx context.Context) error {
	file, err := w.file(ctx)
	if err != nil {
		return err
	}
	fi, err := os.Stat(file + "-wal")
	if err != nil || fi.Size() <= walTruncateSize {
		return err
	}
	conn, err := w.connection(file)
	if err != nil {
		return err
	}
	until := time.Now().Add(checkpointWait)
	for {
		var busy, logged, copied int64
		err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &copied)
		if err != nil || busy == 0 || time.Now().After(until) {
			return err
		}
		if !pause.For(ctx, time.Millisecond+rand.N(time.Millisecond)) {
			return ctx.Err()
		}
	}
}

// connection returns the checkpoints' connection to file, opened by the
// pool's driver with the busy timeout checkpointWait.
func (w *walKeeper) connection(file string) (*sql.DB, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		return w.conn, nil
	}
	dsn := "file:" + (&url.URL{Path: file}).EscapedPath()
	var conn *sql.DB
	if dc, ok := w.db.Driver().(sqldriver.DriverContext); ok {
		c, err := dc.OpenConnector(dsn)
		if err != nil {
			return nil, err
		}
		conn = sql.OpenDB(c)
	} else {
		conn = sql.OpenDB(dsnConnector{w.db.Driver(), dsn})
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	// A pool of one: the pragma holds for every later statement.
	if _, err := conn.ExecContext(w.ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, checkpointWait.Milliseconds())); err != nil {
		conn.Close()
		return nil, err
	}
	w.conn = conn
	return conn, nil
}

// dsnConnector opens connections by a driver.Driver that has no
// connectors of its own.
type dsnConnector struct {
	d   sqldriver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (sqldriver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() sqldriver.Driver                        { return c.d }

// close stops the look under way, if any, waits for it, and closes the
// checkpoints' connection.
func (w *walKeeper) close() error {
	w.mu.Lock()
	w.cancel() // under mu, so that maybeCheck starts no look after it
	w.mu.Unlock()
	w.wg.Wait()
	if w.conn == nil {
		return nil
	}
	return w.conn.Close()
}
