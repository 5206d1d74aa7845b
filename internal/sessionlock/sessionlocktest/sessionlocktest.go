// Package sessionlocktest holds the tests that zklock and etcdlock share,
// run against their real servers: the fair queue wakes one waiter per
// release and leaves nothing behind, shared holds and semaphores follow
// its rule, and Open gives up on an unreachable store within its context.
package sessionlocktest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testworker"
)

// Main is a test package's TestMain: it serves the "hold" worker process
// (testworker.Hold), then runs the tests.
func Main(m *testing.M) {
	testworker.Run(map[string]testworker.Func{"hold": testworker.Hold})
	os.Exit(m.Run())
}

// Queue describes a backend's queue on a live server, for TestQueue.
type Queue struct {
	// NewLocker returns a new Locker, closed at the end of the test.
	NewLocker func(t *testing.T) *dlock.Locker
	// NewLockerRetry returns a new Locker whose MaxRetryInterval is
	// maxRetry, closed at the end of the test.
	NewLockerRetry func(t *testing.T, maxRetry time.Duration) *dlock.Locker
	// Entries returns how many entries (holder and waiters) the lock on
	// name has on the server.
	Entries func(t *testing.T, name string) int
	// Watches returns how many watches the server has set, and, for a
	// store whose waiters share a watch per name, how many waits are
	// set on those: TestQueue expects one per waiter.
	Watches func(t *testing.T) int
	// Wakeups returns how many times a waiter was woken by its watch
	// since the process started.
	Wakeups func() int64
}

// TestQueue checks that a release wakes the next waiter only, and that
// TryAcquire and a cancelled Acquire leave no entry behind.
func TestQueue(t *testing.T, q Queue) {
	// With 100 waiters, handing the lock down the whole queue takes 100
	// wake-ups, not 100*99/2.
	t.Run("NoHerd", func(t *testing.T) {
		const waiters = 100
		name := "herd/" + t.Name()
		holder, l := q.NewLocker(t), q.NewLocker(t)
		k, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		baseWatches := q.Watches(t)
		proceed := make(chan struct{})
		acquired := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				k, err := l.Acquire(t.Context(), name)
				if err != nil {
					t.Errorf("waiter %d: Acquire(%q) = %v", i, name, err)
					return
				}
				acquired <- i
				<-proceed
				if err := k.Release(t.Context()); err != nil {
					t.Errorf("waiter %d: Release = %v", i, err)
				}
			})
		}
		WaitEntries(t, q, name, waiters+1)
		// Every waiter watches its predecessor.
		var watches int
		if !testkit.Poll(testkit.Patience, func() bool { watches = q.Watches(t) - baseWatches; return watches >= waiters }) {
			t.Fatalf("after %v: %d watches set, want %d", testkit.Patience, watches, waiters)
		}
		before := q.Wakeups()
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		select {
		case <-acquired:
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter acquired %q within 5s of the release", name)
		}
		time.Sleep(300 * time.Millisecond) // let any other woken waiter show
		if n := q.Wakeups() - before; n != 1 {
			t.Errorf("one release woke %d waiters, want 1", n)
		}
		close(proceed)
		wg.Wait()
		if n := q.Wakeups() - before; n != waiters {
			t.Errorf("handing the lock through %d waiters took %d wake-ups, want %d", waiters, n, waiters)
		}
	})

	t.Run("NothingLeftBehind", func(t *testing.T) {
		name := "left/" + t.Name()
		a, b := q.NewLocker(t), q.NewLocker(t)
		k, err := a.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		if _, err := b.TryAcquire(t.Context(), name); err == nil {
			t.Fatalf("second TryAcquire(%q) succeeded", name)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, name); err == nil {
			t.Fatalf("Acquire(%q) with a timeout succeeded", name)
		}
		WaitEntries(t, q, name, 1)
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		WaitEntries(t, q, name, 0)
	})
}

// WaitEntries waits until the lock on name has n entries on the server.
func WaitEntries(t *testing.T, q Queue, name string, n int) {
	t.Helper()
	var got int
	if !testkit.Poll(testkit.Patience, func() bool { got = q.Entries(t, name); return got == n }) {
		t.Fatalf("after %v: lock %q has %d entries, want %d", testkit.Patience, name, got, n)
	}
}

// TestOpenUnreachable checks that dlock.Open of url, a store on a closed
// port, gives up within a few seconds of a 1 s context with an error that
// says it cannot connect and wraps context.DeadlineExceeded, and that
// nothing is written to standard error meanwhile.
func TestOpenUnreachable(t *testing.T, url string) {
	stderr := captureStderr(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	l, err := dlock.Open(ctx, url)
	took := time.Since(start)
	if err == nil {
		l.Close()
		t.Fatalf("Open(%q) = a Locker, want an error", url)
	}
	t.Logf("Open(%q) took %v: %v", url, took.Round(time.Millisecond), err)
	if took > 5*time.Second {
		t.Errorf("Open(%q) with a 1s context took %v, want about 1s", url, took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open(%q) = %v, want an error wrapping context.DeadlineExceeded", url, err)
	}
	if !strings.Contains(err.Error(), "cannot connect") {
		t.Errorf("Open(%q) = %v, want it to say it cannot connect", url, err)
	}
	if out := stderr(); out != "" {
		t.Errorf("Open(%q) wrote to stderr: %q", url, out)
	}
}

// captureStderr sends os.Stderr and the log package's output to a pipe
// until the returned func is called, which restores them and returns what
// was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old, oldLog := os.Stderr, log.Writer()
	os.Stderr = w
	log.SetOutput(w)
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { // exits when w is closed
		io.Copy(&buf, r)
		close(done)
	}()
	var once sync.Once
	restore := func() string {
		once.Do(func() {
			os.Stderr = old
			log.SetOutput(oldLog)
			w.Close()
			<-done
			r.Close()
		})
		return buf.String()
	}
	t.Cleanup(func() { restore() })
	return restore
}
