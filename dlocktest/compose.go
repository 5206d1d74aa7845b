package dlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// composeTimeout bounds the properties below, which must not deadlock.
const composeTimeout = 30 * time.Second

func testReleaseEndedContext(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	k := testkit.MustTryAcquire(t, a, name)
	cancel()
	// Adversary: the README's "defer lock.Release(ctx)" in a request
	// that was cancelled. Release waits for the step and reports it: nil,
	// and the name is free when it returns.
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release(%q) with an ended ctx = %v, want nil: it frees the name", name, err)
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name))
}

func testDoAndAcquireAll(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	x, y := uniqueName(t, "-x"), uniqueName(t, "-y")
	ctx, cancel := context.WithTimeout(t.Context(), composeTimeout)
	defer cancel()

	ran := false
	err := a.Do(ctx, x, func(ctx context.Context) error {
		ran = true
		testkit.WantNotAcquired(t, b, x, "while another owner holds it")
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do(%q) = %v (fn ran: %v), want nil after running fn", x, err, ran)
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, x)) // Do released it

	// Two Lockers take both names in opposite orders: no deadlock.
	var wg sync.WaitGroup
	for _, c := range []struct {
		l     *dlock.Locker
		names []string
	}{{a, []string{x, y}}, {b, []string{y, x}}} {
		wg.Go(func() {
			for range 5 {
				ks, err := c.l.AcquireAll(ctx, c.names)
				if err != nil {
					t.Errorf("AcquireAll(%q) = %v", c.names, err)
					return
				}
				for _, k := range ks {
					testkit.MustRelease(t, k)
				}
			}
		})
	}
	wg.Wait()
}

func testLead(t *testing.T, h Harness) {
	name := uniqueName(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), composeTimeout)
	defer cancel()
	var leading, terms atomic.Int32
	errStepDown := errors.New("step down")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		l := newLocker(t, h)
		wg.Go(func() {
			errs[i] = l.Lead(ctx, name, func(lctx context.Context) error {
				if n := leading.Add(1); n != 1 {
					t.Errorf("%d leaders of %q at once", n, name)
				}
				defer leading.Add(-1)
				terms.Add(1)
				time.Sleep(h.ttl() / 4)
				return errStepDown // ends this Locker's Lead: the other takes over
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errStepDown) {
			t.Errorf("Lead %d = %v, want fn's error", i, err)
		}
	}
	if got := terms.Load(); got != 2 {
		t.Errorf("%d terms, want each Locker to lead once", got)
	}
}
