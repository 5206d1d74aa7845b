package dlocktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// waitsNames, waitsPerName and waitsAtOnce size testWaitsLeaveNothing:
// names waited on, waiters per name (half of them given up by ctx), and
// names waited on at once (60 waits in flight: a load every backend
// serves within its timeouts on a busy 2-core machine).
const (
	waitsNames   = 50
	waitsPerName = 20
	waitsAtOnce  = 3
)

// testWaitsLeaveNothing attacks the Lockers with the load a soak run
// found leaks under: a thousand waits on contended names, from two
// Lockers, half of them given up by their context while queued and half
// served. Once every wait has ended, no goroutine any of them started is
// left (the Lockers' own, started before, are allowed), and the names are
// free. Backends count their server's watches in tests of their own.
func testWaitsLeaveNothing(t *testing.T, h Harness) {
	holder, a, b := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	names := make([]string, waitsNames)
	for i := range names {
		names[i] = uniqueName(t, fmt.Sprintf("-%d", i))
	}
	// Warm up: one served wait per Locker starts what a Locker keeps for
	// its life (subscriptions, sessions, connections).
	// (Each Locker is served once, so that what it starts at its first
	// wait, such as PostgreSQL's LISTEN session, exists already.)
	waitRound(t, holder, []*dlock.Locker{a, b}, names[0], 2)
	waitRound(t, holder, []*dlock.Locker{b, a}, names[0], 2)
	// And one batch at full load, so that what a client library keeps
	// per connection once it has served a load (etcd's client holds a
	// watch stream, four goroutines, for a while after its last watcher)
	// is in the baseline: what must not be left is what grows with the
	// waits that follow.
	waitBatch(t, holder, []*dlock.Locker{a, b}, names[:waitsAtOnce])
	names = names[waitsAtOnce:]
	before, _ := snapshot()
	ignore := []string{
		// Idle background workers wait for more work for a few seconds
		// (a step a worker runs is on top of it, and not ignored).
		"github.com/dlock-go/dlock.(*Locker).worker",
		// A connection a pool keeps for reuse (go-sql-driver runs one
		// goroutine per open connection); the pool's bound, not a wait,
		// decides how many stay.
		"github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1",
	}

	var served, gaveUp int
	for batch := range slices.Chunk(names, waitsAtOnce) {
		s, g := waitBatch(t, holder, []*dlock.Locker{a, b}, batch)
		served, gaveUp = served+s, gaveUp+g
	}
	if t.Failed() {
		return
	}
	if served == 0 || gaveUp == 0 {
		t.Fatalf("of %d waits %d were served and %d given up, want some of each", len(names)*waitsPerName, served, gaveUp)
	}
	// Every name is free: at once, or within a few seconds for a name a
	// given-up wait's request took after its caller left (the Locker
	// releases such a name again lateRelease, 1 s, later; a PostgreSQL
	// run once found one still held when looked at at once).
	for _, name := range names {
		testkit.Eventually(t, fmt.Sprintf("%q free after every wait ended", name), func() bool {
			k, err := holder.TryAcquire(t.Context(), name)
			if err != nil {
				return false
			}
			testkit.MustRelease(t, k)
			return true
		})
	}
	// Client libraries close streams a little after their last user
	// (etcd's watch streams): look again for up to 10 s. What a client
	// keeps per connection and reuses (etcd's client may open a new watch
	// stream, four goroutines, and keep it past its last watcher) is
	// allowed up to maxKept goroutines; a goroutine per wait is hundreds.
	left := waitLeft(10*time.Second, before, ignore...)
	if len(left) > maxKept {
		t.Errorf("%d goroutines left after %d waits ended (%d served, %d given up), want at most %d:\n%s", len(left), len(names)*waitsPerName, served, gaveUp, maxKept, strings.Join(left, "\n\n"))
	}
}

// maxKept is how many goroutines testWaitsLeaveNothing allows to remain
// after the waits: a client library's per-connection stream, not one per
// wait.
const maxKept = 8

// waitBatch runs a waitRound on each of names at once, and returns how
// many waits were served and how many gave up.
func waitBatch(t *testing.T, holder *dlock.Locker, ls []*dlock.Locker, names []string) (served, gaveUp int) {
	var (
		wg   sync.WaitGroup
		s, g atomic.Int64
	)
	for _, name := range names {
		wg.Go(func() {
			ds, dg := waitRound(t, holder, ls, name, waitsPerName)
			s.Add(int64(ds))
			g.Add(int64(dg))
		})
	}
	wg.Wait()
	return int(s.Load()), int(g.Load())
}

// waitRound has holder take name, n Acquire calls on ls (in turn) wait
// for it, every other one with a context that ends while it waits, and
// then holder releases it; each served waiter releases at once. It
// returns how many waits were served and how many gave up.
func waitRound(t *testing.T, holder *dlock.Locker, ls []*dlock.Locker, name string, n int) (served, gaveUp int) {
	t.Helper()
	k, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Errorf("TryAcquire(%q) = %v, want a lock", name, err)
		return 0, 0
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts [2]int // served, gave up
	)
	for i := range n {
		patience := time.Minute
		if i%2 == 1 {
			patience = 100 * time.Millisecond
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), patience)
			defer cancel()
			w, err := ls[i%len(ls)].Acquire(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				counts[0]++
				if err := w.Release(t.Context()); err != nil {
					t.Errorf("Release(%q) by waiter %d = %v, want nil", name, i, err)
				}
			case patience < time.Minute:
				counts[1]++
			default:
				t.Errorf("Acquire(%q) by waiter %d with a minute to wait = %v, want a lock", name, i, err)
			}
		})
	}
	testkit.Eventually(t, "the short waits gave up while the name was held", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts[1] == n/2
	})
	if err := k.Release(t.Context()); err != nil {
		t.Errorf("Release(%q) by its holder = %v, want nil", name, err)
	}
	wg.Wait()
	return counts[0], counts[1]
}
