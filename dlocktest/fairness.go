package dlocktest

import (
	"slices"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/internal/testkit"
)

func testFairness(t *testing.T, h Harness) {
	if h.Queued == nil {
		t.Skip("Harness.Queued is nil: the backend does not queue waiters")
	}
	const waiters = 6
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, newLocker(t, h), name)
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		l := newLocker(t, h)
		wg.Go(func() {
			k, err := l.Acquire(t.Context(), name)
			if err != nil {
				t.Errorf("waiter %d: Acquire(%q) = %v, want a lock", i, name, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := k.Release(t.Context()); err != nil {
				t.Errorf("waiter %d: Release(%q) = %v, want nil", i, name, err)
			}
		})
		waitQueued(t, h, name, i+1) // waiter i is in line before waiter i+1 starts
	}
	testkit.MustRelease(t, k)
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Errorf("waiters Acquired in order %v, want arrival order %v", order, want)
	}
}
