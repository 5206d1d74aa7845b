package dlock_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock/memlock"
)

// workers counts the goroutines of Lockers' background worker pools.
func workers(t *testing.T) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatalf("goroutine profile: %v", err)
	}
	n := 0
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(g, "dlock.(*Locker).worker(") {
			n++
		}
	}
	return n
}

// TestWorkerPoolShrinksUnderSteadyTraffic attacks the background worker
// pool with what a soak run saw on etcd: an outage parks many driver
// steps at once (100 acquisitions whose store stalls for 6 s), so the
// pool grows to 100 workers; then traffic goes on steadily, one step in
// flight at a time, for a minute. The pool must shrink back to what the
// traffic uses: workers beyond it are idle for workerIdle (5 s) and exit.
// Before the fix all idle workers shared one channel, so steady traffic
// reached each in turn and none was ever idle for 5 s: 100 workers
// stayed until Close.
func TestWorkerPoolShrinksUnderSteadyTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), false)
		defer l.Close()
		const burst = 100
		stalled := func(ctx context.Context, name string) {
			k, err := l.Acquire(ctx, name)
			if err == nil {
				k.Release(context.Background())
			}
		}
		d.mu.Lock()
		d.hangAcquire = make(chan struct{}) // the store answers no acquisition until the outage ends
		hang := d.hangAcquire
		d.mu.Unlock()
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				stalled(ctx, fmt.Sprintf("outage-%d", i))
			})
		}
		synctest.Wait()
		if got := workers(t); got < burst {
			t.Fatalf("workers during the outage = %d, want at least %d (one per stalled step)", got, burst)
		}
		time.Sleep(6 * time.Second)
		d.mu.Lock()
		d.hangAcquire = nil
		d.mu.Unlock()
		close(hang) // the store answers again
		wg.Wait()

		// Steady traffic: one acquisition in flight at a time, a step
		// every 50 ms, for a minute.
		for i := 0; time.Duration(i)*50*time.Millisecond < time.Minute; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			k, err := l.Acquire(ctx, "steady")
			cancel()
			if err != nil {
				t.Fatalf("Acquire(%q) after the outage = %v, want nil", "steady", err)
			}
			if err := k.Release(context.Background()); err != nil {
				t.Fatalf("Release(%q) = %v, want nil", "steady", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if got := workers(t); got > 4 {
			t.Errorf("workers after a minute of steady traffic with one step in flight = %d, want at most 4 (the pool grew to %d in the outage and must shrink)", got, burst)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		synctest.Wait()
		if got := workers(t); got != 0 {
			t.Errorf("workers after Close = %d, want 0", got)
		}
	})
}
