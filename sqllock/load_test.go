package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestLoadFigures measures, when DLOCK_SQL_LOAD is a duration (such as
// 20s), the soak's load on PostgreSQL and MariaDB through Lockers of
// dlock.Open with default settings: 4 Lockers, 32 goroutines each, 1,000
// names (80 % exclusive, 10 % shared, 10 % semaphores of 3), a TTL of
// 3 s, a 2 s ctx, holds of 0-5 ms. It logs the most connections the
// server saw, the connections opened per second, acquisitions per second
// and errors by kind. It is a measurement, not a test: it asserts nothing
// and is skipped without DLOCK_SQL_LOAD.
func TestLoadFigures(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("DLOCK_SQL_LOAD"))
	if err != nil {
		t.Skip("a measurement: set DLOCK_SQL_LOAD=20s to run it")
	}
	t.Run("postgres", func(t *testing.T) {
		p := testserver.StartPostgres(t)
		store := "postgres://postgres@" + p.Addr() + "/postgres?sslmode=disable"
		measureLoad(t, d, store, p.DB(t), pgCounts)
	})
	t.Run("mariadb", func(t *testing.T) {
		m := testserver.StartMariaDB(t)
		store := "mysql://root@" + m.Addr() + "/dlock"
		measureLoad(t, d, store, m.DB(t), mariaCounts)
	})
}

// serverCounts returns the client connections the server has open, other
// than the caller's, and the connections it has accepted so far.
type serverCounts func(ctx context.Context, db *sql.DB) (open, total int64, err error)

func pgCounts(ctx context.Context, db *sql.DB) (open, total int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()),
	(SELECT sum(sessions) FROM pg_stat_database)::bigint`).Scan(&open, &total)
	return open, total, err
}

func mariaCounts(ctx context.Context, db *sql.DB) (open, total int64, err error) {
	status := func(name string) (int64, error) {
		var (
			k string
			v int64
		)
		err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE '`+name+`'`).Scan(&k, &v)
		return v, err
	}
	if open, err = status("Threads_connected"); err != nil {
		return 0, 0, err
	}
	total, err = status("Connections")
	return open - 1, total, err
}

// loadTally counts a load's outcomes.
type loadTally struct {
	acquired atomic.Int64
	mu       sync.Mutex
	errs     map[string]int
}

func (lt *loadTally) fail(op string, err error) {
	kind := "other: " + err.Error()
	switch msg := err.Error(); {
	case strings.Contains(msg, "too many"), strings.Contains(msg, "53300"), strings.Contains(msg, "1040"):
		kind = "too many connections"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "ctx deadline"
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.errs[op+": "+kind]++
}

func measureLoad(t *testing.T, d time.Duration, store string, admin *sql.DB, counts serverCounts) {
	t.Helper()
	admin.SetMaxOpenConns(1)
	ctx := t.Context()
	_, total0, err := counts(ctx, admin)
	if err != nil {
		t.Fatalf("server counts: %v", err)
	}
	lt := &loadTally{errs: make(map[string]int)}
	var lockers []*dlock.Locker
	for range 4 {
		l, err := dlock.Open(ctx, store)
		if err != nil {
			t.Fatalf("Open(%q) = %v, want a Locker", store, err)
		}
		defer l.Close()
		lockers = append(lockers, l)
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range 32 {
			wg.Go(func() {
				for time.Now().Before(end) {
					loadStep(ctx, l, lt)
				}
			})
		}
	}
	var peak int64
	for time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
		if n, _, err := counts(ctx, admin); err == nil {
			peak = max(peak, n)
		}
	}
	wg.Wait()
	_, total1, err := counts(ctx, admin)
	if err != nil {
		t.Fatalf("server counts: %v", err)
	}
	t.Logf("%s: %d Lockers x 32 goroutines for %v: peak connections %d, connections opened %d (%.1f/s), acquisitions %d (%.0f/s)",
		store, len(lockers), d, peak, total1-total0-1, float64(total1-total0-1)/d.Seconds(), lt.acquired.Load(), float64(lt.acquired.Load())/d.Seconds())
	var kinds []string
	for k, n := range lt.errs {
		kinds = append(kinds, fmt.Sprintf("%6d %s", n, k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("errors: %.300s", k)
	}
}

// loadStep acquires one name of 1,000 as the soak does and releases it.
func loadStep(ctx context.Context, l *dlock.Locker, lt *loadTally) {
	name := fmt.Sprintf("load-%d", rand.N(1000))
	opts := []dlock.Option{dlock.WithTTL(3 * time.Second)}
	switch r := rand.N(10); {
	case r == 0:
		name += "-s"
		opts = append(opts, dlock.Shared())
	case r == 1:
		name += "-l"
		opts = append(opts, dlock.WithLimit(3))
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	k, err := l.Acquire(actx, name, opts...)
	if err != nil {
		if ctx.Err() == nil {
			lt.fail("acquire", err)
		}
		return
	}
	lt.acquired.Add(1)
	time.Sleep(time.Duration(rand.N(5000)) * time.Microsecond)
	if err := k.Release(ctx); err != nil && ctx.Err() == nil {
		lt.fail("release", err)
	}
}
