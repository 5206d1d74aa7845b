package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The adversary is a watch, goroutine or channel that outlives the wait
// it served, which sustained load turns into a leak (as ZooKeeper's
// exists-watches did in the soak of issue 24). Three Lockers, each on a
// client of its own as in separate processes, run 1,440 acquisitions on
// few names (exclusive, shared and permits, short holds, a tenth given
// up by their context), about 700 of which wait in the queue; once all
// have ended, the server's watchers and the process's goroutines (but
// the core's idle workers and gRPC's per connection) are back to what
// they were before.
func TestNoWatchOutlivesItsWait(t *testing.T) {
	e := testserver.StartEtcd(t)
	var lockers []*dlock.Locker
	for range 3 {
		l := newLocker(t, e.Client(t), nil)
		mustRelease(t, mustAcquire(t, l, "warm-up")) // grants the session
		lockers = append(lockers, l)
	}
	baseWatchers, baseStacks := e.Watchers(t), goroutineStacks()
	baseGoroutines := count(baseStacks)
	wakeups := testhook.Wakeups()
	start := time.Now()
	var acquired, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			for i := range 60 {
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
	woken := testhook.Wakeups() - wakeups
	t.Logf("%d acquisitions, %d waits given up, %d waits woken by a release, in %v", acquired.Load(), gaveUp.Load(), woken, time.Since(start).Round(time.Millisecond))
	if woken < 200 || gaveUp.Load() == 0 {
		t.Fatalf("%d waits woken, %d given up: the load did not queue (want ≥ 200 and ≥ 1)", woken, gaveUp.Load())
	}
	var watchers, goroutines int
	deadline := time.Now().Add(30 * time.Second)
	for {
		watchers, goroutines = e.Watchers(t), count(goroutineStacks())
		if watchers <= baseWatchers && goroutines <= baseGoroutines {
			t.Logf("back to %d watchers, %d goroutines %v after the last wait", watchers, goroutines, time.Since(deadline.Add(-30*time.Second)).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			for stack, n := range goroutineStacks() {
				if n > baseStacks[stack] {
					t.Logf("%d goroutines more than before the load:\n%s", n-baseStacks[stack], stack)
				}
			}
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

// goroutineStacks returns how many goroutines there are with each stack
// (the functions, without arguments or addresses), but the core's idle
// background workers (the core's, which lets them idle for a few seconds
// before they exit; dlocktest checks them) and gRPC's per connection.
func goroutineStacks() map[string]int {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	stacks := make(map[string]int)
	for _, block := range strings.Split(b.String(), "\n\n")[1:] {
		head, rest, _ := strings.Cut(block, "\n")
		n, _ := strconv.Atoi(strings.Fields(head + " 0")[0])
		var funcs []string
		for _, line := range strings.Split(rest, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
				fn, _, _ := strings.Cut(f[2], "+")
				funcs = append(funcs, fn)
			}
		}
		if idleWorker(funcs) || connection(funcs) {
			continue
		}
		stacks[strings.Join(funcs, "\n")] += n
	}
	return stacks
}

// idleWorker reports whether funcs, a goroutine's stack innermost first,
// is the core's background worker waiting for work (and running nothing).
func idleWorker(funcs []string) bool {
	for _, f := range funcs {
		if !strings.HasPrefix(f, "runtime.") {
			return f == "github.com/dlock-go/dlock.(*Locker).worker"
		}
	}
	return false
}

// connection reports whether funcs is one of gRPC's goroutines per
// connection (a client may redial during the load, and gRPC's serializers
// end a few seconds later), not per call.
func connection(funcs []string) bool {
	return len(funcs) > 0 && (strings.HasPrefix(funcs[0], "google.golang.org/grpc/internal/transport.") ||
		strings.HasPrefix(funcs[0], "google.golang.org/grpc/internal/grpcsync."))
}

// count returns how many goroutines stacks counts.
func count(stacks map[string]int) int {
	n := 0
	for _, c := range stacks {
		n += c
	}
	return n
}
