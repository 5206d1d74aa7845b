package dlocktest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// RunBenchmarks measures the store h describes:
//
//   - Uncontended: one goroutine, Acquire then Release of one name;
//   - ParallelNames: goroutines of one Locker, each on its own name;
//   - Handoff: one name passed between two Lockers; the time from Release
//     returning to the waiter's Acquire returning (negative when the store
//     hands the lock over before the releaser has its reply), and from
//     the Release call to the waiter's Acquire returning, as p50 and p99.
//
// When h.Ping is set, each also reports its cost in round trips (the mean
// of Ping calls made in the same benchmark, just before).
func RunBenchmarks(b *testing.B, h Harness) {
	b.Run("Uncontended", func(b *testing.B) { benchUncontended(b, h) })
	b.Run("ParallelNames", func(b *testing.B) { benchParallel(b, h) })
	b.Run("Handoff", func(b *testing.B) { benchHandoff(b, h) })
}

// roundTrip returns the mean of n Ping calls, or 0 without h.Ping: a mean,
// like the ns/op it is compared with.
func roundTrip(b *testing.B, h Harness, n int) time.Duration {
	b.Helper()
	if h.Ping == nil {
		return 0
	}
	start := time.Now()
	for range n {
		if err := h.Ping(b.Context()); err != nil {
			b.Fatalf("Ping() = %v, want nil", err)
		}
	}
	return time.Since(start) / time.Duration(n)
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
	rtt := roundTrip(b, h, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		k, err := l.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		if err := k.Release(ctx); err != nil {
			b.Fatalf("Release(%q) = %v", name, err)
		}
	}
	perOp := b.Elapsed() / time.Duration(b.N)
	// CPU time of this process per cycle: the client's own cost, which
	// other load on the machine barely changes (unlike wall time).
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "client-cpu-ns/op")
	if rtt > 0 {
		b.ReportMetric(float64(rtt.Nanoseconds()), "ping-ns")
		b.ReportMetric(float64(perOp)/float64(rtt), "round-trips/op")
	}
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
	rtt := roundTrip(b, h, 1000)
	var handoffs, fromCall []time.Duration
	for b.Loop() {
		k, err := holder.Acquire(ctx, name)
		if err != nil {
			b.Fatalf("Acquire(%q) = %v", name, err)
		}
		got := AcquireAsync(ctx, waiter, name)
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
	if rtt > 0 {
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
