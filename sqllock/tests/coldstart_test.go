package sqllock_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// TestColdStartOnNewFile attacks a fresh SQLite file with what a fleet
// started at once does (the soak's workload with nothing prepared): 4
// Lockers of dlock.Open, as 4 processes would be, and 32 goroutines each,
// all acquiring at once before the table exists. Every
// goroutine of a Locker used to run the migration itself, 128 writers
// fighting for SQLite's one write lock with their CREATE TABLE, and the
// soak saw 0 acquisitions in 15 s ("create table dlock_locks: context
// deadline exceeded" 598 times). Now one migration runs per Locker and
// the others wait for it: every goroutine gets its lock. Each has 30 s,
// not the soak's 2 s: 256 steps through SQLite's one writer under -race
// beside other packages' tests took more than 2 s in CI (57 of 128 timed
// out waiting for a connection), and what is tested is that the
// migration does not lock the others out, not a speed.
func TestColdStartOnNewFile(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")
	const lockers, goroutines = 4, 32
	var ls []*dlock.Locker
	for range lockers {
		l, err := dlock.Open(t.Context(), store)
		if err != nil {
			t.Fatalf("Open(%q) = %v", store, err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for i, l := range ls {
		for g := range goroutines {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				k, err := l.Acquire(ctx, fmt.Sprintf("cold-%d-%d", i, g))
				if err == nil {
					err = k.Release(t.Context())
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d acquisitions on a fresh file failed, want 0; first: %v", len(failed), lockers*goroutines, failed[0])
	}
}
