//go:build unix

package dlock_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// BenchmarkKeeperHolding100k holds 100,000 renewed locks in one Locker on
// memlock for 3 s and reports the process's CPU time per second of wall
// time while nothing else runs: the keeper's cost (finding what is due,
// batching, applying results) plus memlock's refreshes. With one TTL the
// locks renew in a few large batches; with spread TTLs (1 s to 4.6 s)
// renewals fall due all the time, so the keeper wakes often. It fails if
// any lock was lost meanwhile.
func BenchmarkKeeperHolding100k(b *testing.B) {
	b.Run("same-ttl", func(b *testing.B) {
		benchmarkKeeper(b, func(int) time.Duration { return 3 * time.Second })
	})
	b.Run("spread-ttl", func(b *testing.B) {
		benchmarkKeeper(b, func(i int) time.Duration { return time.Second + time.Duration(i%97)*37*time.Millisecond })
	})
}

func benchmarkKeeper(b *testing.B, ttlOf func(i int) time.Duration) {
	const (
		n      = 100_000
		window = 3 * time.Second
	)
	l, _ := memlock.New(nil)
	defer l.Close()
	ctx := context.Background()
	locks := make([]*dlock.Lock, n)
	for i := range locks {
		k, err := l.TryAcquire(ctx, "n"+strconv.Itoa(i), dlock.WithTTL(ttlOf(i)))
		if err != nil {
			b.Fatalf("TryAcquire = %v", err)
		}
		locks[i] = k
	}
	for b.Loop() {
		cpu0, t0 := cpuTime(b), time.Now()
		time.Sleep(window)
		cpu, wall := cpuTime(b)-cpu0, time.Since(t0)
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/wall.Seconds(), "cpu-ms/s")
	}
	for i, k := range locks {
		if testkit.IsClosed(k.Done()) {
			b.Fatalf("lock %d of %d lost while held: %v", i, n, context.Cause(k.Context()))
		}
	}
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
