package dlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

// BenchmarkCycle measures the core's cost of one uncontended acquisition
// and release on memlock, whose steps are a map lookup under a mutex, so
// that the figures are mostly the core's: TryAcquire, Acquire with a
// context that cannot end (as a service's background loop calls it),
// Acquire with a cancellable context, and Acquire from 64 goroutines on
// distinct names at once (the benchmark's scenario 2 on Redis).
func BenchmarkCycle(b *testing.B) {
	cases, cancel := cycleCases()
	defer cancel()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			l, _ := memlock.New(nil)
			defer l.Close()
			b.ReportAllocs()
			for b.Loop() {
				cycle(b, l, c.ctx, "bench", c.wait)
			}
		})
	}
	b.Run("parallel-64", func(b *testing.B) {
		l, _ := memlock.New(nil)
		defer l.Close()
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32) // 64 goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			name := "bench" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				cycle(b, l, context.Background(), name, true)
			}
		})
	})
}

func cycle(b *testing.B, l *dlock.Locker, ctx context.Context, name string, wait bool) {
	var (
		k   *dlock.Lock
		err error
	)
	if wait {
		k, err = l.Acquire(ctx, name, dlock.WithTTL(driver.DefaultTTL))
	} else {
		k, err = l.TryAcquire(ctx, name, dlock.WithTTL(driver.DefaultTTL))
	}
	if err != nil {
		b.Fatalf("Acquire(%q) = %v, want nil", name, err)
	}
	if err := k.Release(ctx); err != nil {
		b.Fatalf("Release(%q) = %v, want nil", name, err)
	}
}

// cycleAllocs is what one uncontended acquisition and release allocates
// in the core on memlock: the acquisition (its handle, held lease and
// owner together) and the Lock's context. A step more (a context of the
// core's own around each release) shows as more allocations.
const cycleAllocs = 4

// TestCycleAllocs: the adversary is the hot path's cost creeping up
// unseen. Stop 35's change to Release with an ended ctx first gave every
// release with a ctx that cannot end (context.Background(), the
// commonest) a bounded context of its own: 7 allocations a cycle, not 4,
// and the bench's 64-goroutine throughput fell from 1.5× to 1.0× the
// hand-written lock. Allocation counts are exact, not timed.
func TestCycleAllocs(t *testing.T) {
	cases, cancel := cycleCases()
	defer cancel()
	for _, c := range cases {
		l, _ := memlock.New(nil)
		got := testing.AllocsPerRun(1000, func() {
			var k *dlock.Lock
			var err error
			if c.wait {
				k, err = l.Acquire(c.ctx, "a")
			} else {
				k, err = l.TryAcquire(c.ctx, "a")
			}
			if err != nil {
				t.Fatalf("%s: acquire = %v", c.name, err)
			}
			if err := k.Release(c.ctx); err != nil {
				t.Fatalf("%s: Release = %v", c.name, err)
			}
		})
		l.Close()
		if got > cycleAllocs {
			t.Errorf("%s: %v allocations per cycle, want at most %d", c.name, got, cycleAllocs)
		}
	}
}

// cycleCase is one kind of uncontended cycle: TryAcquire, or Acquire,
// with ctx.
type cycleCase struct {
	name string
	ctx  context.Context
	wait bool
}

// cycleCases are the cycles BenchmarkCycle times and TestCycleAllocs
// counts: TryAcquire and Acquire with a context that cannot end (as a
// service's background loop calls them), and Acquire with one that can.
// cancel ends the cancellable one.
func cycleCases() (cases []cycleCase, cancel context.CancelFunc) {
	cancellable, cancel := context.WithCancel(context.Background())
	return []cycleCase{
		{"try", context.Background(), false},
		{"acquire", context.Background(), true},
		{"acquire-cancellable", cancellable, true},
	}, cancel
}
