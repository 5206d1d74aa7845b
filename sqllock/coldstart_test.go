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
// all acquiring at once before the table exists, each with 2 s. Every
// goroutine of a Locker used to run the migration itself, 128 writers
// fighting for SQLite's one write lock with their CREATE TABLE, and the
// soak saw 0 acquisitions in 15 s ("create table dlock_locks: context
// deadline exceeded" 598 times). Now one migration runs per Locker and
// the others wait for it: every goroutine gets its lock.
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
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
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
