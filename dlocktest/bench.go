package dlocktest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// RunBenchmarks measures the store h describes:
//
//   - Uncontended: one goroutine, Acquire then Release of one name;
//   - ParallelNames: goroutines of one Locker, each on its own name;
//   - Handoff: one name passed between two Lockers; the time from Release
//     returning to the waiter's Acquire returning (negative when the store
//     hands the lock over before the releaser has its reply), and from
//     the Release call to the waiter's Acquire returning, as p50 and p99.
//   - SharedReaders: 64 readers (goroutines spread over 4 Lockers) taking
//     one name in shared mode and releasing it, as acquisitions per second;
//   - Semaphore: 16 contenders (each its own Locker) for a semaphore of 4
//     permits, each holding a permit for 1 ms; the time from a Release
//     returning to a waiting contender's Acquire returning, p50 and p99,
//     and permits per second. Both are left out for a backend without
//     shared locks and semaphores (Harness.NoModes).
//
// When h.Ping is set, Uncontended and Handoff also report their cost in
// round trips: the mean of Ping calls made between their iterations.
func RunBenchmarks(b *testing.B, h Harness) {
	b.Run("Uncontended", func(b *testing.B) { benchUncontended(b, h) })
	b.Run("ParallelNames", func(b *testing.B) { benchParallel(b, h) })
	b.Run("Handoff", func(b *testing.B) { benchHandoff(b, h) })
	if !h.NoModes { // nothing to measure on a backend without them
		b.Run("SharedReaders", func(b *testing.B) { benchShared(b, h) })
		b.Run("Semaphore", func(b *testing.B) { benchSemaphore(b, h) })
	}
}

func benchShared(b *testing.B, h Harness) {
	const readers, lockers = 64, 4
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		ls[i] = newLocker(b, h)
	}
	name := uniqueName(b, "")
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(readers / max(1, runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := ls[next.Add(1)%lockers]
		ctx := context.Background()
		for pb.Next() {
			k, err := l.Acquire(ctx, name, dlock.Shared())
			if err != nil {
				b.Errorf("Acquire(%q, Shared) = %v", name, err)
				return
			}
			if err := k.Release(ctx); err != nil {
				b.Errorf("Release(%q) = %v", name, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func benchSemaphore(b *testing.B, h Harness) {
	const contenders, permits, hold = 16, 4, time.Millisecond
	ls := make([]*dlock.Locker, contenders)
	for i := range ls {
		ls[i] = newLocker(b, h)
	}
	name := uniqueName(b, "")
	var (
		mu       sync.Mutex
		released []time.Time // Release return times not yet matched to a waiter
		handoffs []time.Duration
		left     atomic.Int64
	)
	left.Store(int64(b.N))
	ctx := b.Context()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				asked := time.Now()
				k, err := l.Acquire(ctx, name, dlock.WithLimit(permits))
				if err != nil {
					b.Errorf("Acquire(%q, WithLimit(%d)) = %v", name, permits, err)
					return
				}
				got := time.Now()
				mu.Lock()
				// A contender that waited was let in by the oldest release
				// that came after it asked.
				for len(released) > 0 && released[0].Before(asked) {
					released = released[1:]
				}
				if len(released) > 0 {
					handoffs = append(handoffs, got.Sub(released[0]))
					released = released[1:]
				}
				mu.Unlock()
				time.Sleep(hold)
				if err := k.Release(ctx); err != nil {
					b.Errorf("Release(%q) = %v", name, err)
					return
				}
				mu.Lock()
				released = append(released, time.Now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if len(handoffs) > 0 {
		b.ReportMetric(float64(percentile(handoffs, 0.5).Nanoseconds()), "handoff-p50-ns")
		b.ReportMetric(float64(percentile(handoffs, 0.99).Nanoseconds()), "handoff-p99-ns")
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func benchUncontended(b *testing.B, h Harness) {
	l := newLocker(b, h)
	name := uniqueName(b, "")
	ctx := b.Context()
	var pinger interleavedPing
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; b.Loop(); i++ {
		k, err := l.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		if err := k.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
		if i%pingEvery == 0 {
			pinger.ping(b, h)
		}
	}
	perOp := b.Elapsed() / time.Duration(b.N)
	// CPU time of this process per cycle: the client's own cost, which
	// other load on the machine barely changes (unlike wall time).
	b.ReportMetric(float64(processCPU()-cpu-pinger.cpu)/float64(b.N), "client-cpu-ns/op")
	if rtt := pinger.mean(); rtt > 0 {
		b.ReportMetric(float64(rtt.Nanoseconds()), "ping-ns")
		b.ReportMetric(float64(perOp)/float64(rtt), "round-trips/op")
	}
}

// pingEvery is how many cycles Uncontended runs between two Ping calls.
const pingEvery = 8

// interleavedPing measures h.Ping between the cycles of a benchmark, with
// the benchmark's timer stopped, so that the round trip the cycles are
// compared with is taken under the same conditions (on a shared machine
// the loopback round trip drifts by a factor of 3 within seconds).
type interleavedPing struct {
	n     int
	total time.Duration // wall time of the pings
	cpu   time.Duration // this process's CPU time during them
}

func (p *interleavedPing) ping(b *testing.B, h Harness) {
	if h.Ping == nil {
		return
	}
	b.StopTimer()
	cpu, start := processCPU(), time.Now()
	if err := h.Ping(b.Context()); err != nil {
		b.Fatalf("Ping() = %v, want nil", err)
	}
	p.total += time.Since(start)
	p.cpu += processCPU() - cpu
	p.n++
	b.StartTimer()
}

// mean returns the mean Ping, or 0 without any.
func (p *interleavedPing) mean() time.Duration {
	if p.n == 0 {
		return 0
	}
	return p.total / time.Duration(p.n)
}

func benchParallel(b *testing.B, h Harness) {
	l := newLocker(b, h)
	base := uniqueName(b, "")
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("%s/%d", base, next.Add(1))
		ctx := context.Background()
		for pb.Next() {
			k, err := l.Acquire(ctx, name)
			if err != nil {
				b.Errorf("Acquire(%q) = %v", name, err)
				return
			}
			if err := k.Release(ctx); err != nil {
				b.Errorf("Release(%q) = %v", name, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func benchHandoff(b *testing.B, h Harness) {
	holder, waiter := newLocker(b, h), newLocker(b, h)
	name := uniqueName(b, "")
	ctx := b.Context()
	var pinger interleavedPing
	var handoffs, fromCall []time.Duration
	for b.Loop() {
		k, err := holder.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		got := testkit.AcquireAsync(ctx, waiter, name)
		// Let the waiter fail its first attempt and start waiting.
		time.Sleep(2 * time.Millisecond)
		releasing := time.Now()
		if err := k.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
		released := time.Now()
		r := <-got
		if r.Err != nil {
			b.Fatalf("waiting Acquire(%q) = %v", name, r.Err)
		}
		handoffs = append(handoffs, r.At.Sub(released))
		fromCall = append(fromCall, r.At.Sub(releasing))
		if err := r.Lock.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
		pinger.ping(b, h)
	}
	// From Release returning: negative when the store hands the lock over
	// before the releaser has its reply (the waiter is told first).
	p50, p99 := percentile(handoffs, 0.5), percentile(handoffs, 0.99)
	b.ReportMetric(float64(p50.Nanoseconds()), "handoff-p50-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "handoff-p99-ns")
	// From the Release call: the whole handoff, release included.
	c50, c99 := percentile(fromCall, 0.5), percentile(fromCall, 0.99)
	b.ReportMetric(float64(c50.Nanoseconds()), "release-to-acquired-p50-ns")
	b.ReportMetric(float64(c99.Nanoseconds()), "release-to-acquired-p99-ns")
	if rtt := pinger.mean(); rtt > 0 {
		b.ReportMetric(float64(c50)/float64(rtt), "release-to-acquired-p50-round-trips")
	}
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
