package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/sqllock"
)

// holdTime is how long the holder keeps the lock in the long-hold handoff
// benchmarks: longer than DefaultPollInterval, so a polling waiter has
// backed off to its longest wait.
const holdTime = 300 * time.Millisecond

// benchLongHoldHandoff measures the time from Release returning to the
// waiter's Acquire returning when the waiter has waited holdTime, the case
// where polling and notifications differ.
func benchLongHoldHandoff(b *testing.B, db *sql.DB, d sqllock.Dialect) {
	holder := newLocker(b, db, d, nil)
	waiter := newLocker(b, db, d, nil)
	name := testkit.UniqueName(b, "sqllock")
	ctx := b.Context()
	var ds []time.Duration
	for b.Loop() {
		k, err := holder.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		type result struct {
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		go func() {
			k, err := waiter.Acquire(ctx, name)
			at := time.Now()
			if err == nil {
				err = k.Release(ctx)
			}
			got <- result{at, err}
		}()
		time.Sleep(holdTime)
		if err := k.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
		released := time.Now()
		r := <-got
		if r.err != nil {
			b.Fatalf("waiter: %v", r.err)
		}
		ds = append(ds, r.at.Sub(released))
	}
	reportHandoffs(b, ds)
}

// reportHandoffs reports the median and 99th percentile of ds.
func reportHandoffs(b *testing.B, ds []time.Duration) {
	b.Helper()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "handoff-p50-ns")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Nanoseconds()), "handoff-p99-ns")
}

func BenchmarkLongHoldHandoff(b *testing.B) {
	b.Run("MariaDB", func(b *testing.B) {
		benchLongHoldHandoff(b, testserver.StartMariaDB(b).DB(b), sqllock.MySQL)
	})
	b.Run("Postgres", func(b *testing.B) {
		benchLongHoldHandoff(b, testserver.StartPostgres(b).DB(b), sqllock.PostgreSQL)
	})
	b.Run("SQLite", func(b *testing.B) { benchLongHoldHandoff(b, newSQLite(b), sqllock.SQLite) })
}

// BenchmarkLongHoldHandoffProcesses is BenchmarkLongHoldHandoff on SQLite
// with the waiter in another process (the handoff worker), the case of
// processes sharing a database file on one host. Both processes read the
// host's wall clock.
func BenchmarkLongHoldHandoffProcesses(b *testing.B) {
	path := filepath.Join(b.TempDir(), "locks.db")
	holder := newLocker(b, openSQLite(b, path), sqllock.SQLite, nil)
	name := testkit.UniqueName(b, "sqllock")
	ctx := b.Context()
	w := testworker.Start(b, "handoff", "sqlite://"+path, name)
	var ds []time.Duration
	for b.Loop() {
		// The worker released in the last round (or never held), and
		// waits until this process holds before it asks again.
		k, err := holder.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		time.Sleep(holdTime)
		if err := k.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
		released := time.Now()
		at, err := strconv.ParseInt(w.Expect(b, "acquired", time.Minute), 10, 64)
		if err != nil {
			b.Fatalf("worker handoff: bad time: %v", err)
		}
		w.Expect(b, "released", time.Minute)
		ds = append(ds, time.Unix(0, at).Sub(released))
	}
	reportHandoffs(b, ds)
}

// handoffWorker takes the lock named args[1] in the store args[0] over
// and over, each time once another process holds it, printing "acquired
// UNIXNANO" when it has it and "released" when it let it go.
func handoffWorker(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("handoff: want STORE NAME, got %q", args)
	}
	l, err := dlock.Open(ctx, args[0])
	if err != nil {
		return err
	}
	defer l.Close()
	name := args[1]
	for ctx.Err() == nil {
		for {
			hs, err := l.Inspect(ctx, name)
			if err != nil {
				return err
			}
			if len(hs) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		k, err := l.Acquire(ctx, name)
		if err != nil {
			return err
		}
		fmt.Printf("acquired %d\n", time.Now().UnixNano())
		if err := k.Release(ctx); err != nil {
			return err
		}
		fmt.Println("released")
	}
	return nil
}

// BenchmarkUncontendedCycle measures an uncontended Acquire and Release on
// one Locker: on MySQL, with the named lock its wake-ups add.
func BenchmarkUncontendedCycle(b *testing.B) {
	b.Run("MariaDB", func(b *testing.B) {
		db := testserver.StartMariaDB(b).DB(b)
		l := newLocker(b, db, sqllock.MySQL, nil)
		name := testkit.UniqueName(b, "sqllock")
		ctx := b.Context()
		for b.Loop() {
			k, err := l.Acquire(ctx, name)
			if err != nil {
				b.Fatalf("Acquire(%q) = %v", name, err)
			}
			if err := k.Release(ctx); err != nil {
				b.Fatalf("Release(%q) = %v", name, err)
			}
		}
	})
}

// BenchmarkHotName measures acquisitions of one name by 16 goroutines in
// 4 Lockers, each holding it for a millisecond: on MySQL, waiters in other
// Lockers are woken by named locks.
func BenchmarkHotName(b *testing.B) {
	b.Run("MariaDB", func(b *testing.B) {
		db := testserver.StartMariaDB(b).DB(b)
		var ls []*dlock.Locker
		for range 4 {
			ls = append(ls, newLocker(b, db, sqllock.MySQL, nil))
		}
		name := testkit.UniqueName(b, "sqllock")
		var (
			next atomic.Int32
			got  [4]atomic.Int64 // acquisitions per Locker
		)
		b.SetParallelism(8) // 16 goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) % len(ls)
			l := ls[i]
			for pb.Next() {
				got[i].Add(1)
				k, err := l.Acquire(b.Context(), name)
				if err != nil {
					b.Errorf("Acquire(%q) = %v", name, err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := k.Release(b.Context()); err != nil {
					b.Errorf("Release(%q) = %v", name, err)
					return
				}
			}
		})
		// Jain's index over the Lockers' shares: 1 when equal.
		var sum, sq float64
		for i := range got {
			x := float64(got[i].Load())
			sum, sq = sum+x, sq+x*x
		}
		b.ReportMetric(sum*sum/(float64(len(got))*sq), "jain")
	})
}
