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
	"github.com/dlock-go/dlock/internal/testkit"
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
		testkit.MustRelease(t, testkit.MustAcquire(t, l, "warm-up")) // grants the session
		lockers = append(lockers, l)
	}
	baseStacks, _ := goroutineStacks()
	baseWatchers := e.Watchers(t)
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
	var idle idleStreams
	deadline := time.Now().Add(30 * time.Second)
	for {
		var stacks map[string]int
		stacks, idle = goroutineStacks()
		watchers, goroutines = e.Watchers(t), count(stacks)
		if watchers <= baseWatchers && goroutines <= baseGoroutines {
			t.Logf("back to %d watchers, %d goroutines %v after the last wait; %d idle watch streams", watchers, goroutines, time.Since(deadline.Add(-30*time.Second)).Round(time.Millisecond), idle.streams)
			break
		}
		if time.Now().After(deadline) {
			for stack, n := range stacks {
				if n > baseStacks[stack] {
					t.Logf("%d goroutines more than before the load:\n%s", n-baseStacks[stack], stack)
				}
			}
			t.Fatalf("30s after the last wait: %d server watchers, %d goroutines; want %d, %d as before the load",
				watchers, goroutines, baseWatchers, baseGoroutines)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The etcd client keeps one gRPC watch stream per client and context
	// metadata (etcdlock's waits use two: plain, and WithRequireLeader for
	// Observe), and when a watch is given up before the server confirmed
	// it, the stream outlives its last watch until the next Watch on it
	// reuses it (client/v3 watch.go: run ends a stream only when a closing
	// watch leaves none, and the abandoned one is still counted). That is
	// bounded by the clients, not by the load; more would be a leak.
	if limit := 2 * len(lockers); idle.streams > limit || idle.companions > 2*idle.streams {
		t.Fatalf("%d idle watch streams with %d companion goroutines; want at most %d (two per client), two companions each", idle.streams, idle.companions, limit)
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
// before they exit; dlocktest checks them), gRPC's per connection, and
// the etcd client's watch streams, which it counts apart.
func goroutineStacks() (map[string]int, idleStreams) {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	stacks := make(map[string]int)
	var idle idleStreams
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
		switch top := firstOwn(funcs); {
		case idleWorker(top) || connection(funcs):
		case top == "go.etcd.io/etcd/client/v3.(*watchGrpcStream).run":
			idle.streams += n
		case top == "google.golang.org/grpc.newClientStreamWithParams.func4" ||
			top == "context.(*cancelCtx).propagateCancel.func2":
			idle.companions += n // a gRPC stream's context watchers
		default:
			stacks[strings.Join(funcs, "\n")] += n
		}
	}
	return stacks, idle
}

// idleStreams counts the etcd client's watch stream goroutines and the
// goroutines that watch their contexts.
type idleStreams struct{ streams, companions int }

// firstOwn returns the innermost function of funcs, a goroutine's stack
// innermost first, that is not the runtime's.
func firstOwn(funcs []string) string {
	for _, f := range funcs {
		if !strings.HasPrefix(f, "runtime.") {
			return f
		}
	}
	return ""
}

// idleWorker reports whether top, a goroutine's innermost own function,
// is the core's background worker waiting for work (and running nothing).
func idleWorker(top string) bool {
	return top == "github.com/dlock-go/dlock.(*Locker).worker"
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
