package natslock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestSharedReadersContend runs 32 readers (over 4 Lockers) taking one
// name in shared mode and releasing it, as fast as they can, for a few
// seconds. The adversary is contention on one key: every step of every
// reader is a compare-and-set on the same revision, so each write
// that succeeds makes all the others in flight fail. Every Release must
// still return nil within its own bound (the core's 5 s for a context
// without a deadline), and no reader may lose its hold.
func TestSharedReadersContend(t *testing.T) {
	const readers, lockers, run = 64, 4, 5 * time.Second
	n := testserver.StartNATS(t)
	kv := bucket(t, n.URL(), "contend", 1)
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		ls[i] = newLocker(t, kv)
	}
	name := testkit.UniqueName(t, "contend")
	var (
		wg     sync.WaitGroup
		cycles atomic.Int64
	)
	stop := time.Now().Add(run)
	for i := range readers {
		l := ls[i%lockers]
		wg.Go(func() {
			ctx := context.Background() // Release's own bound applies
			for time.Now().Before(stop) {
				k, err := l.Acquire(t.Context(), name, dlock.Shared())
				if err != nil {
					t.Errorf("Acquire(%q, Shared) = %v", name, err)
					return
				}
				if testkit.IsClosed(k.Done()) {
					t.Errorf("a reader's Done closed before its Release: %v", context.Cause(k.Context()))
				}
				if err := k.Release(ctx); err != nil {
					t.Errorf("Release(%q) = %v", name, err)
					return
				}
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d readers: %d acquire+release cycles in %v (%.0f/s)", readers, cycles.Load(), run, float64(cycles.Load())/run.Seconds())
	if cycles.Load() < readers {
		t.Errorf("%d cycles, want at least one per reader (%d)", cycles.Load(), readers)
	}
}
