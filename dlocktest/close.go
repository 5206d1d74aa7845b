package dlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func testClose(t *testing.T, h Harness) {
	other := newLocker(t, h)
	name, waited := uniqueName(t, ""), uniqueName(t, "-waited")
	blocker := testkit.MustTryAcquire(t, other, waited)
	defer blocker.Release(t.Context())

	// Goroutines that exist now (servers, clients, other tests) are not
	// the Locker's; everything it starts must be gone after Close.
	before, _ := snapshot()
	l := h.NewLocker(t)
	k := testkit.MustTryAcquire(t, l, name, dlock.WithTTL(h.ttl()))
	inner, err := l.Acquire(k.Context(), name)
	if err != nil {
		t.Fatalf("re-entering Acquire(%q) = %v, want a lock", name, err)
	}
	starts := testkit.WatchStarts(l)
	got := testkit.AcquireAsync(t.Context(), l, waited)
	// A context that cannot end: only Close stops this wait.
	gotBackground := testkit.AcquireAsync(context.Background(), l, waited)
	starts.WaitInAcquire(t, waited, 2)
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	for _, got := range []<-chan testkit.Acquired{got, gotBackground} {
		select {
		case r := <-got:
			if !errors.Is(r.Err, dlock.ErrClosed) {
				t.Fatalf("Acquire(%q) waiting across Close = %v, want ErrClosed", waited, r.Err)
			}
		case <-time.After(promptly):
			t.Fatalf("Acquire(%q) still waiting %v after Close", waited, promptly)
		}
	}
	for _, h := range []*dlock.Lock{k, inner} {
		if !testkit.IsClosed(h.Done()) {
			t.Fatalf("Done of a lock held across Close is open, want closed")
		}
		if cause := context.Cause(h.Context()); !errors.Is(cause, dlock.ErrClosed) {
			t.Fatalf("context.Cause after Close = %v, want ErrClosed", cause)
		}
	}
	// Close released the lock on the server. (other is called with a
	// context that cannot end, so it runs the driver in this goroutine and
	// starts no guard goroutine that the check below would count as l's.)
	k2, err := other.TryAcquire(context.Background(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q) after Close = %v, want a lock (Close released it)", name, err)
	}
	if err := k2.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", name, err)
	}

	if _, err := l.Acquire(t.Context(), name); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, err := l.TryAcquire(k.Context(), name); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("re-entering TryAcquire after Close = %v, want ErrClosed", err)
	}
	if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Refresh after Close = %v, want ErrClosed", err)
	}
	if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Release after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	// Goroutines may take a moment to return after their channels close;
	// waitLeft looks again for a while before reporting.
	if left := waitLeft(5*time.Second, before); len(left) > 0 {
		t.Errorf("%d goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
