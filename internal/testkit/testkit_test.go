package testkit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

func TestIsClosed(t *testing.T) {
	ch := make(chan struct{})
	if testkit.IsClosed(ch) {
		t.Fatal("IsClosed(open channel) = true, want false")
	}
	close(ch)
	if !testkit.IsClosed(ch) {
		t.Fatal("IsClosed(closed channel) = false, want true")
	}
}

// TestPoll checks both outcomes; the adversary is a condition that never
// holds, which Poll must give up on rather than wait forever.
func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !testkit.Poll(time.Minute, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("Poll of a condition true on the third call = false, want true")
	}
	if testkit.Poll(0, func() bool { return false }) {
		t.Fatal("Poll of a condition never true = true, want false")
	}
}

// TestWaitInAcquire checks that WaitInAcquire returns once a goroutine is
// inside Acquire of a held name, and that the Acquire is still waiting
// then; the adversary is a waiter that has not yet called Acquire.
func TestWaitInAcquire(t *testing.T) {
	store := memlock.NewStore()
	holder, waiter := testkit.MemLocker(t, store), testkit.MemLocker(t, store)
	k := testkit.MustTryAcquire(t, holder, "held")
	starts := testkit.WatchStarts(waiter)
	got := testkit.AcquireAsync(t.Context(), waiter, "held")
	starts.WaitInAcquire(t, "held", 1)
	select {
	case r := <-got:
		t.Fatalf("Acquire(%q) returned (%v) while the holder held it", "held", r.Err)
	default:
	}
	testkit.MustRelease(t, k)
	testkit.MustRelease(t, testkit.WantAcquired(t, got, "held", testkit.Patience).Lock)
}
