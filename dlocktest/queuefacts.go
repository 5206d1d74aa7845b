package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testkit"
)

// doneRecorder is a Hook that keeps the AcquireDone events of a Locker.
type doneRecorder struct {
	mu     sync.Mutex
	events []hook.AcquireDone
}

func recordDone(l *dlock.Locker) *doneRecorder {
	r := &doneRecorder{}
	l.AddHook(hook.Hook{AcquireDone: func(_ context.Context, e hook.AcquireDone) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	}})
	return r
}

// last returns the latest AcquireDone event, failing the test if there is
// none.
func (r *doneRecorder) last(t *testing.T, what string) hook.AcquireDone {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		t.Fatalf("%s: no AcquireDone event", what)
	}
	return r.events[len(r.events)-1]
}

// waitWaiters waits until l.Waiters(name) reports want.
func waitWaiters(t *testing.T, l *dlock.Locker, name string, want int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("Waiters(%q) = %d", name, want), func() bool {
		n, err := l.Waiters(t.Context(), name)
		if err != nil {
			t.Fatalf("Waiters(%q) = %v, want %d", name, err, want)
		}
		return n == want
	})
}

func testQueueFacts(t *testing.T, h Harness) {
	holder := newLocker(t, h)
	name := uniqueName(t, "")

	// A free name: not contended, nobody ahead where the store queues.
	n, err := holder.Waiters(t.Context(), name)
	queues := !errors.Is(err, dlock.ErrUnsupported)
	if queues && (err != nil || n != 0) {
		t.Fatalf("Waiters(%q) on a free name = %d, %v, want 0, nil", name, n, err)
	}
	wantAhead := func(queued int) int {
		if queues {
			return queued
		}
		return -1
	}
	rh := recordDone(holder)
	k, err := holder.Acquire(t.Context(), name)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", name, err)
	}
	if e := rh.last(t, "uncontended Acquire"); e.Outcome != hook.Acquired || e.Contended || e.Ahead != wantAhead(0) {
		t.Errorf("uncontended Acquire(%q): AcquireDone Outcome, Contended, Ahead = %v, %v, %d, want acquired, false, %d",
			name, e.Outcome, e.Contended, e.Ahead, wantAhead(0))
	}

	// TryAcquire on a held name: contended, and it joins no queue.
	tryer := newLocker(t, h)
	rt := recordDone(tryer)
	testkit.WantNotAcquired(t, tryer, name, "while another owner holds it")
	if e := rt.last(t, "TryAcquire"); e.Outcome != hook.NotAcquired || !e.Contended || e.Ahead != -1 {
		t.Errorf("TryAcquire(%q) on a held name: AcquireDone Outcome, Contended, Ahead = %v, %v, %d, want not_acquired, true, -1",
			name, e.Outcome, e.Contended, e.Ahead)
	}

	if queues {
		// Two waiters queue, then give up: the store counts them, then
		// nobody.
		ctx, cancel := context.WithCancel(t.Context())
		var recs []*doneRecorder
		var got []<-chan testkit.Acquired
		var ws []*dlock.Locker
		for i := range 2 {
			w := newLocker(t, h)
			ws = append(ws, w)
			recs = append(recs, recordDone(w))
			got = append(got, testkit.AcquireAsync(ctx, w, name))
			waitWaiters(t, holder, name, i+1)
		}
		cancel()
		for i, ch := range got {
			if r := <-ch; !errors.Is(r.Err, context.Canceled) {
				if r.Lock != nil {
					r.Lock.Release(t.Context())
				}
				t.Fatalf("waiter %d: cancelled Acquire(%q) = %v, want context.Canceled", i, name, r.Err)
			}
			if e := recs[i].last(t, "cancelled Acquire"); e.Outcome != hook.Canceled || !e.Contended {
				t.Errorf("waiter %d: cancelled Acquire(%q): AcquireDone Outcome, Contended = %v, %v, want canceled, true",
					i, name, e.Outcome, e.Contended)
			}
		}
		// A cancelled wait may still be leaving the queue when Acquire
		// returns (its store step finishes in the background under
		// load); Close waits for that, so the count below is final and
		// no late entry is taken for the next waiter's.
		for _, w := range ws {
			w.Close()
		}
		waitWaiters(t, holder, name, 0)
		// Waiters counts live entries only. A queue can keep a dead one
		// (a cancelled wait whose leaving step failed under load) until
		// a later call finds it dead or the queue expires, and a new
		// waiter's Ahead counts it, as redislock documents: seen once
		// in a whole run (Ahead 2 behind one holder). Where the harness
		// sees the queue itself, it must be empty too.
		if h.Queued != nil {
			waitQueued(t, h, name, 0)
		}
	}

	// A waiter queued behind the one holder gets the name from it.
	w := newLocker(t, h)
	rw := recordDone(w)
	got := testkit.AcquireAsync(t.Context(), w, name)
	if queues {
		waitWaiters(t, holder, name, 1)
	} else {
		testkit.WantWaiting(t, got, name)
	}
	testkit.MustRelease(t, k)
	r := testkit.WantAcquired(t, got, name, promptly)
	defer testkit.MustRelease(t, r.Lock)
	e := rw.last(t, "waiting Acquire")
	if e.Outcome != hook.Acquired || e.Ahead != wantAhead(1) {
		t.Errorf("Acquire(%q) behind one holder: AcquireDone Outcome, Ahead = %v, %d, want acquired, %d", name, e.Outcome, e.Ahead, wantAhead(1))
	}
	// Contended is certain only where the store shows the waiter queued
	// before the release.
	if queues && !e.Contended {
		t.Errorf("Acquire(%q) queued behind one holder: AcquireDone Contended = false, want true", name)
	}
	if queues {
		waitWaiters(t, holder, name, 0)
	}
}
