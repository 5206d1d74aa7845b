package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// walBound is the largest -wal file TestSQLiteWALBounded accepts: a
// lock table of a few rows needs a few pages, SQLite's own
// auto-checkpoint runs every 1,000 frames (4 MiB of 4 KiB pages), and
// the Lockers truncate the file above 8 MiB; the rest is room for what
// is written while a checkpoint waits its turn on a loaded host.
const walBound = 24 << 20

// walCycles is how many times the test's Lockers acquire and release
// a lock: each cycle writes two transactions of a few 4 KiB pages to the
// WAL, so that the cycles write several times walBound, which a WAL
// that is never reset exceeds.
const walCycles = 5000

// TestSQLiteWALBounded checks that the -wal file of a database that
// several Lockers (several pools, as processes would have) keep busy
// stays below walBound. The adversary is checkpoint starvation
// (sqlite.org/wal.html, "Avoiding Excessively Large WAL Files"): SQLite
// resets the WAL only when a writer starts after a checkpoint has copied
// every frame back and no reader still reads from the WAL, and its
// auto-checkpoint is PASSIVE, so readers whose transactions overlap, each
// begun before the previous one ended and while writes went on, keep
// every checkpoint from reaching the WAL's end and the WAL grows without
// bound. Here two connections outside the Lockers read so, in turn, each
// holding its snapshot until the Lockers have made two more acquisitions
// (or briefly, if they make none: a reader that waited for writers
// blocked by a checkpoint would starve that checkpoint for ever, which no
// real reader does).
func TestSQLiteWALBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	const lockers, goroutines = 3, 4
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		db := openSQLite(t, path)
		db.SetMaxOpenConns(sqllock.DefaultSQLiteConns)
		ls[i] = newLocker(t, db, sqllock.SQLite, nil)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var acquired atomic.Int64
	readers := openSQLite(t, path)
	starving, stopStarving := context.WithCancel(ctx)
	starved := make(chan error, 1)
	go func() { starved <- starveCheckpoints(starving, readers, &acquired) }() // exits when stopStarving is called // exits when stopStarving is called

	var (
		wg     sync.WaitGroup
		peak   atomic.Int64
		failed = make(chan error, lockers*goroutines)
	)
	for i, l := range ls {
		for g := range goroutines {
			wg.Go(func() {
				name := fmt.Sprintf("wal-%d", (i*goroutines+g)%8)
				for acquired.Add(1) <= walCycles && ctx.Err() == nil {
					if err := acquireOnce(ctx, l, name); err != nil {
						failed <- err
						return
					}
					peak.Store(max(peak.Load(), walSize(path)))
				}
			})
		}
	}
	wg.Wait()
	stopStarving()
	if err := <-starved; err != nil {
		t.Fatalf("the overlapping readers failed: %v", err)
	}
	close(failed)
	for err := range failed {
		t.Fatalf("Acquire and Release under load: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the Lockers made fewer than %d acquisitions before %v", walCycles, ctx.Err())
	}
	t.Logf("%d acquisitions; -wal file at most %.1f MiB, %.1f MiB at the end", walCycles, float64(peak.Load())/(1<<20), float64(walSize(path))/(1<<20))
	if got := peak.Load(); got > walBound {
		t.Errorf("-wal file grew to %.1f MiB under %d Lockers and overlapping readers, want at most %d MiB (checkpoint starvation)", float64(got)/(1<<20), lockers, walBound>>20)
	}
}

// acquireOnce acquires name on l and releases it.
func acquireOnce(ctx context.Context, l *dlock.Locker, name string) error {
	k, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	return k.Release(ctx)
}

// walSize returns the size of the -wal file of the database at path, 0
// if there is none.
func walSize(path string) int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// starveCheckpoints reads db in overlapping transactions until ctx ends:
// each begins, and takes its snapshot, before the previous one ends, and
// holds it until acquired has grown by two (writes went on meanwhile) or
// readHold has passed.
func starveCheckpoints(ctx context.Context, db *sql.DB, acquired *atomic.Int64) error {
	const readHold = 10 * time.Millisecond
	var prev *sql.Tx
	defer func() {
		if prev != nil {
			prev.Rollback()
		}
	}()
	for ctx.Err() == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return ctxOr(ctx, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			tx.Rollback()
			return ctxOr(ctx, err)
		}
		if prev != nil {
			prev.Rollback()
		}
		prev = tx
		from, until := acquired.Load(), time.Now().Add(readHold)
		for acquired.Load() < from+2 && time.Now().Before(until) && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// ctxOr returns nil if ctx has ended (the error is the cancellation's),
// else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
