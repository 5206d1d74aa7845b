package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The adversary is a watch, goroutine or channel that outlives the wait
// it served, which sustained load turns into a leak (as ZooKeeper's
// exists-watches did in the soak of issue 24). Three Lockers, each on a
// client of its own as in separate processes, run thousands of
// acquisitions on few names (exclusive, shared and permits, short holds,
// a tenth given up by their context while queued); once all have ended,
// the server's watchers and the process's goroutines are back to what
// they were before.
func TestNoWatchOutlivesItsWait(t *testing.T) {
	e := testserver.StartEtcd(t)
	var lockers []*dlock.Locker
	for range 3 {
		l := newLocker(t, e.Client(t), nil)
		mustRelease(t, mustAcquire(t, l, "warm-up")) // grants the session
		lockers = append(lockers, l)
	}
	baseWatchers, baseGoroutines := e.Watchers(t), runtime.NumGoroutine()
	wakeups := etcdlock.Wakeups()
	var acquired, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			for i := range 80 {
				switch err := step(t.Context(), lockers[g%3], g*1000+i); {
				case err == nil:
					acquired.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					gaveUp.Add(1)
				default:
					t.Errorf("goroutine %d, step %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	woken := etcdlock.Wakeups() - wakeups
	t.Logf("%d acquisitions, %d waits given up, %d waits woken by a release", acquired.Load(), gaveUp.Load(), woken)
	if woken < 200 || gaveUp.Load() == 0 {
		t.Fatalf("%d waits woken, %d given up: the load did not queue (want ≥ 200 and ≥ 1)", woken, gaveUp.Load())
	}
	var watchers, goroutines int
	deadline := time.Now().Add(30 * time.Second)
	for {
		watchers, goroutines = e.Watchers(t), runtime.NumGoroutine()
		if watchers <= baseWatchers && goroutines <= baseGoroutines {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
			t.Fatalf("30s after the last wait: %d server watchers, %d goroutines; want %d, %d as before the load",
				watchers, goroutines, baseWatchers, baseGoroutines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// step is one acquisition of the load, chosen by seed: 80 % exclusive
// and 10 % shared on one of 8 names, 10 % a permit of 3 on one of 2
// others; a tenth of them give up after a few milliseconds; holds last
// 0-2 ms.
func step(ctx context.Context, l *dlock.Locker, seed int) error {
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	name, opts := fmt.Sprintf("rw/%d", r.IntN(8)), []dlock.Option{}
	switch p := r.IntN(10); {
	case p == 0:
		opts = append(opts, dlock.Shared())
	case p == 1:
		name, opts = fmt.Sprintf("sem/%d", r.IntN(2)), append(opts, dlock.WithLimit(3))
	}
	if r.IntN(10) == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(1+r.IntN(5))*time.Millisecond)
		defer cancel()
	}
	k, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
	return k.Release(context.WithoutCancel(ctx))
}
