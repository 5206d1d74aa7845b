package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// The properties of shared holds and semaphores (dlock.Shared,
// dlock.WithLimit) and of Observe.

// settle bounds waits for something that polling stores do within a
// few retry intervals (driver.DefaultMaxRetryInterval is 2 s).
const settle = 10 * time.Second

// tryShared is TryAcquire in shared mode.
func tryShared(l *dlock.Locker, ctx context.Context, name string, opts ...dlock.Option) (*dlock.Lock, error) {
	return l.TryAcquire(ctx, name, append(opts, dlock.Shared())...)
}

// inspectHolders returns name's holders by owner, failing the test if the
// backend cannot inspect.
func inspectHolders(t *testing.T, l *dlock.Locker, name string) map[string]dlock.LockInfo {
	t.Helper()
	infos, err := l.Inspect(t.Context(), name)
	if err != nil {
		t.Fatalf("Inspect(%q) = %v", name, err)
	}
	m := make(map[string]dlock.LockInfo)
	for _, in := range infos {
		m[in.Owner] = in
	}
	return m
}

func testSharedHolds(t *testing.T, h Harness) {
	a, b, w := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	ra, err := tryShared(a, t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q, Shared) = %v, want a lock", name, err)
	}
	rb, err := tryShared(b, t.Context(), name, dlock.WithMetadata("reader b"))
	if err != nil {
		t.Fatalf("second TryAcquire(%q, Shared) by another owner = %v, want a lock held together", name, err)
	}
	testkit.WantNotAcquired(t, w, name, "exclusive while two readers hold it")
	holders := inspectHolders(t, w, name)
	if len(holders) != 2 {
		t.Fatalf("Inspect(%q) lists %d holders, want the 2 readers: %+v", name, len(holders), holders)
	}
	for _, k := range []*dlock.Lock{ra, rb} {
		in, ok := holders[k.Owner()]
		if !ok || !in.Shared || in.Limit != 0 || in.Fence != k.Fence() {
			t.Errorf("Inspect(%q) shows holder %s as %+v, want shared, limit 0, fence %d", name, k.Owner(), in, k.Fence())
		}
	}
	if in := holders[rb.Owner()]; in.Metadata != "reader b" {
		t.Errorf("Inspect(%q) metadata of reader b = %q, want %q", name, in.Metadata, "reader b")
	}
	testkit.MustRelease(t, ra)
	testkit.WantNotAcquired(t, w, name, "exclusive while one reader holds it")
	testkit.MustRelease(t, rb)
	kw := testkit.MustTryAcquire(t, w, name)
	testkit.WantNotAcquired(t, a, name, "shared while a writer holds it", dlock.Shared())
	if holders := inspectHolders(t, a, name); len(holders) != 1 || holders[kw.Owner()].Shared {
		t.Errorf("Inspect(%q) while a writer holds it = %+v, want one exclusive holder", name, holders)
	}
	testkit.MustRelease(t, kw)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, a, name, dlock.Shared()))
}

func testSemaphore(t *testing.T, h Harness) {
	const n = 3
	name := uniqueName(t, "")
	ls := make([]*dlock.Locker, n+1)
	for i := range ls {
		ls[i] = newLocker(t, h)
	}
	ks := make([]*dlock.Lock, n)
	for i := range n {
		ks[i] = testkit.MustTryAcquire(t, ls[i], name, dlock.WithLimit(n))
		if i > 0 && ks[i].Fence() <= ks[i-1].Fence() {
			t.Errorf("permit %d has fence %d, want above permit %d's %d", i, ks[i].Fence(), i-1, ks[i-1].Fence())
		}
	}
	testkit.WantNotAcquired(t, ls[n], name, "for a 4th permit of 3", dlock.WithLimit(n))
	holders := inspectHolders(t, ls[n], name)
	if len(holders) != n {
		t.Fatalf("Inspect(%q) lists %d holders, want %d permits: %+v", name, len(holders), n, holders)
	}
	for _, k := range ks {
		if in := holders[k.Owner()]; in.Limit != n || in.Shared || in.Fence != k.Fence() {
			t.Errorf("Inspect(%q) shows permit %s as %+v, want limit %d, fence %d", name, k.Owner(), in, n, k.Fence())
		}
	}
	testkit.MustRelease(t, ks[1])
	k := testkit.MustTryAcquire(t, ls[n], name, dlock.WithLimit(n))
	if k.Fence() <= ks[2].Fence() {
		t.Errorf("permit taken after a release has fence %d, want above every earlier permit's (%d)", k.Fence(), ks[2].Fence())
	}
	testkit.WantNotAcquired(t, ls[1], name, "for a 4th permit of 3", dlock.WithLimit(n))
	for _, k := range []*dlock.Lock{ks[0], ks[2], k} {
		testkit.MustRelease(t, k)
	}
	// Once every permit is back, the name is free for any mode.
	testkit.MustRelease(t, testkit.MustTryAcquire(t, ls[0], name))
}

func testModeMisuse(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	ctx := t.Context()
	mutex, sem := uniqueName(t, "-mutex"), uniqueName(t, "-sem")
	testkit.WantInvalid(t, ctx, a, mutex, "with Shared and WithLimit", dlock.Shared(), dlock.WithLimit(2))
	testkit.WantInvalid(t, ctx, a, mutex, "with WithLimit(0)", dlock.WithLimit(0))

	k := testkit.MustTryAcquire(t, a, mutex)
	testkit.WantInvalid(t, ctx, b, mutex, "as a semaphore while held as a lock", dlock.WithLimit(2))
	testkit.WantInvalid(t, k.Context(), a, mutex, "as a semaphore inside its exclusive hold", dlock.WithLimit(2))
	testkit.MustRelease(t, k)

	p := testkit.MustTryAcquire(t, a, sem, dlock.WithLimit(2))
	testkit.WantInvalid(t, ctx, b, sem, "with another limit", dlock.WithLimit(3))
	testkit.WantInvalid(t, ctx, b, sem, "exclusively while held as a semaphore")
	testkit.WantInvalid(t, ctx, b, sem, "shared while held as a semaphore", dlock.Shared())
	testkit.WantInvalid(t, p.Context(), a, sem, "with another limit inside its permit", dlock.WithLimit(3))
	// A waiting Acquire gets the same error at once, rather than a wait.
	wctx, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	if k, err := b.Acquire(wctx, sem, dlock.WithLimit(5)); !errors.Is(err, dlock.ErrInvalid) {
		if k != nil {
			k.Release(ctx)
		}
		t.Fatalf("Acquire(%q) with another limit = %v, want an error wrapping ErrInvalid", sem, err)
	}
	// None of that took anything: the second permit is still free.
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, sem, dlock.WithLimit(2)))
	testkit.MustRelease(t, p)

	r := testkit.MustTryAcquire(t, a, mutex, dlock.Shared())
	testkit.WantInvalid(t, r.Context(), a, mutex, "exclusively inside a shared hold (an upgrade)")
	// The refused upgrade left the reader's hold as it was.
	if err := r.Refresh(ctx); err != nil {
		t.Fatalf("Refresh of the shared hold after a refused upgrade = %v", err)
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, mutex, dlock.Shared()))
	testkit.MustRelease(t, r)
}

func testSharedReentrancy(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, sem := uniqueName(t, ""), uniqueName(t, "-sem")
	r := testkit.MustTryAcquire(t, a, name, dlock.Shared())
	r2, err := a.TryAcquire(r.Context(), name, dlock.Shared())
	if err != nil {
		t.Fatalf("re-entering TryAcquire(%q) = %v, want a lock", name, err)
	}
	if r2.Fence() != r.Fence() || r2.Owner() != r.Owner() {
		t.Errorf("shared re-entry has fence %d owner %s, want the hold's %d %s", r2.Fence(), r2.Owner(), r.Fence(), r.Owner())
	}
	testkit.MustRelease(t, r)
	testkit.WantNotAcquired(t, b, name, "while another owner holds it") // the re-entered shared hold still keeps writers out
	testkit.MustRelease(t, r2)

	w := testkit.MustTryAcquire(t, a, name)
	w2, err := a.TryAcquire(w.Context(), name, dlock.Shared())
	if err != nil {
		t.Fatalf("re-entering TryAcquire(%q) = %v, want a lock", name, err)
	}
	if w2.Fence() != w.Fence() {
		t.Errorf("Shared inside an exclusive hold has fence %d, want the exclusive hold's %d (re-entry)", w2.Fence(), w.Fence())
	}
	testkit.MustRelease(t, w)
	testkit.WantNotAcquired(t, b, name, "shared while a re-entered exclusive hold is open", dlock.Shared())
	testkit.MustRelease(t, w2)

	p := testkit.MustTryAcquire(t, a, sem, dlock.WithLimit(1))
	p2, err := a.TryAcquire(p.Context(), sem, dlock.WithLimit(1))
	if err != nil {
		t.Fatalf("re-entering TryAcquire(%q) = %v, want a lock", sem, err)
	}
	if p2.Fence() != p.Fence() {
		t.Errorf("permit re-entry has fence %d, want %d", p2.Fence(), p.Fence())
	}
	testkit.MustRelease(t, p2)
	testkit.WantNotAcquired(t, b, sem, "for the only permit while a re-entered one is open", dlock.WithLimit(1))
	testkit.MustRelease(t, p)
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, sem, dlock.WithLimit(1)))
}

func testSharedFencing(t *testing.T, h Harness) {
	ls := []*dlock.Locker{newLocker(t, h), newLocker(t, h), newLocker(t, h)}
	name := uniqueName(t, "")
	var last uint64
	next := func(k *dlock.Lock, what string) {
		t.Helper()
		if k.Fence() <= last {
			t.Errorf("%s has fence %d, want above every earlier token on the name (%d)", what, k.Fence(), last)
		}
		last = k.Fence()
	}
	for round := range 3 {
		var rs []*dlock.Lock
		for _, l := range ls {
			r := testkit.MustTryAcquire(t, l, name, dlock.Shared())
			next(r, "a shared hold")
			rs = append(rs, r)
		}
		for _, r := range rs {
			testkit.MustRelease(t, r)
		}
		w := testkit.MustTryAcquire(t, ls[round], name)
		next(w, "a writer after readers")
		testkit.MustRelease(t, w)
	}
}

// waitWriterQueued returns once a waiting exclusive acquisition of name
// keeps later readers out: on a queueing store once it is in line, and
// on every store once a new shared TryAcquire fails.
func waitWriterQueued(t *testing.T, h Harness, probe *dlock.Locker, name string, queued int) {
	t.Helper()
	if h.Queued != nil {
		waitQueued(t, h, name, queued)
	}
	deadline := time.Now().Add(settle)
	for {
		k, err := tryShared(probe, t.Context(), name)
		if errors.Is(err, dlock.ErrNotAcquired) {
			return
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q, Shared) = %v", name, err)
		}
		// The writer had not tried yet: this reader came before it.
		testkit.MustRelease(t, k)
		if time.Now().After(deadline) {
			t.Fatalf("shared acquisitions still overtake an exclusive Acquire(%q) that has waited %v behind a reader", name, settle)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testWriterNotStarved(t *testing.T, h Harness) {
	r1, w, r2, probe := newLocker(t, h), newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), composeTimeout)
	defer cancel()
	k1 := testkit.MustTryAcquire(t, r1, name, dlock.Shared())
	gotW := testkit.AcquireAsync(ctx, w, name, dlock.WithTTL(h.ttl()))
	waitWriterQueued(t, h, probe, name, 1)
	gotR := testkit.AcquireAsync(ctx, r2, name, dlock.Shared())
	if h.Queued != nil {
		waitQueued(t, h, name, 2)
	}
	testkit.WantWaiting(t, gotR, name)
	testkit.MustRelease(t, k1)
	kw := testkit.WantAcquired(t, gotW, name, settle).Lock
	if kw.Fence() <= k1.Fence() {
		t.Errorf("writer's fence %d, want above the earlier reader's %d", kw.Fence(), k1.Fence())
	}
	testkit.WantWaiting(t, gotR, name) // the later reader waits for the writer
	testkit.MustRelease(t, kw)
	kr := testkit.WantAcquired(t, gotR, name, settle).Lock
	if kr.Fence() <= kw.Fence() {
		t.Errorf("later reader's fence %d, want above the writer's %d", kr.Fence(), kw.Fence())
	}
	testkit.MustRelease(t, kr)
}

// waitQueued waits until n owners queue for name on a store that queues.
func waitQueued(t *testing.T, h Harness, name string, n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("Queued(%q) = %d", name, n), func() bool { return h.Queued(t, name) == n })
}

func testSharedCancelledWait(t *testing.T, h Harness) {
	r, w, probe := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, r, name, dlock.Shared())
	ctx, cancel := context.WithCancel(t.Context())
	// A long TTL: a writer's intent that outlives the wait cannot lapse
	// during the test.
	got := testkit.AcquireAsync(ctx, w, name, dlock.WithTTL(time.Hour))
	waitWriterQueued(t, h, probe, name, 1)
	cancel()
	select {
	case res := <-got:
		if !errors.Is(res.Err, context.Canceled) {
			if res.Lock != nil {
				res.Lock.Release(t.Context())
			}
			t.Fatalf("cancelled Acquire(%q) = %v, want context.Canceled", name, res.Err)
		}
	case <-time.After(settle):
		t.Fatalf("cancelled Acquire(%q) still waiting after %v", name, settle)
	}
	// Nothing of the wait is left: readers get in again, and the queue is
	// empty.
	deadline := time.Now().Add(settle)
	for {
		k2, err := tryShared(probe, t.Context(), name)
		if err == nil {
			testkit.MustRelease(t, k2)
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("TryAcquire(%q, Shared) %v after an exclusive wait was cancelled = %v, want a lock", name, settle, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.Queued != nil {
		waitQueued(t, h, name, 0)
	}
	testkit.MustRelease(t, k)
}

func testSemaphoreWaiting(t *testing.T, h Harness) {
	const n, waiters = 2, 4
	name := uniqueName(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), composeTimeout)
	defer cancel()
	holders := []*dlock.Lock{
		testkit.MustTryAcquire(t, newLocker(t, h), name, dlock.WithLimit(n)),
		testkit.MustTryAcquire(t, newLocker(t, h), name, dlock.WithLimit(n)),
	}
	var (
		mu      sync.Mutex
		order   []int
		fences  [waiters]uint64
		holding int
		wg      sync.WaitGroup
	)
	for i := range waiters {
		l := newLocker(t, h)
		wg.Go(func() {
			k, err := l.Acquire(ctx, name, dlock.WithLimit(n))
			if err != nil {
				t.Errorf("waiter %d: Acquire(%q, WithLimit(%d)) = %v, want a permit", i, name, n, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			fences[i] = k.Fence()
			if holding++; holding > n {
				t.Errorf("%d holders of a semaphore of %d", holding, n)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			holding--
			mu.Unlock()
			if err := k.Release(ctx); err != nil {
				t.Errorf("waiter %d: Release = %v", i, err)
			}
		})
		if h.Queued != nil {
			waitQueued(t, h, name, i+1) // waiter i is in line before i+1 starts
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Freeing one permit wakes a waiter, long before any lease or the
	// holder's second permit could let it in.
	testkit.MustRelease(t, holders[0])
	deadline := time.After(settle)
	for {
		mu.Lock()
		done := len(order)
		mu.Unlock()
		if done > 0 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("no waiter of %q got the permit released %v ago", name, settle)
		case <-time.After(5 * time.Millisecond):
		}
	}
	testkit.MustRelease(t, holders[1])
	wg.Wait()
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters got a permit", len(order), waiters)
	}
	// On a store that queues, permits are granted in arrival order. The
	// tokens, issued by the store as it grants, show that order; the order
	// in which the Acquire calls return need not (two permits granted
	// within a millisecond race to their waiters).
	if h.Queued != nil {
		for i := 1; i < waiters; i++ {
			if fences[i] <= fences[i-1] {
				t.Errorf("waiters in arrival order got fences %v, want them increasing: permits granted in arrival order on a store that queues", fences)
				break
			}
		}
	}
}

func testSharedRenewalAndLoss(t *testing.T, h Harness) {
	a, b, c, w := newLocker(t, h), newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name, sem, ttl := uniqueName(t, ""), uniqueName(t, "-sem"), h.ttl()
	ra := testkit.MustTryAcquire(t, a, name, dlock.Shared(), dlock.WithTTL(ttl))
	rb := testkit.MustTryAcquire(t, b, name, dlock.Shared(), dlock.WithTTL(ttl))
	p := testkit.MustTryAcquire(t, c, sem, dlock.WithLimit(1), dlock.WithTTL(ttl))
	time.Sleep(3 * ttl) // renewed every TTL/3
	for _, k := range []*dlock.Lock{ra, rb, p} {
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("Done of renewed %s closed (%v), want open", k.Name(), context.Cause(k.Context()))
		}
	}
	testkit.WantNotAcquired(t, w, name, "while another owner holds it")
	testkit.WantNotAcquired(t, w, sem, "for the only permit", dlock.WithLimit(1))

	h.Expire(t, name)
	h.Expire(t, sem)
	for _, k := range []*dlock.Lock{ra, rb, p} {
		waitClosed(t, k.Done(), ttl+slack, "Done of a "+k.Name()+" holder deleted behind its back")
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Fatalf("context.Cause = %v, want ErrLost", cause)
		}
	}
	kw := testkit.MustTryAcquire(t, w, name)
	if kw.Fence() <= rb.Fence() {
		t.Errorf("writer's fence %d after the readers were lost, want above theirs (%d)", kw.Fence(), rb.Fence())
	}
	testkit.MustRelease(t, kw)

	// ForceRelease frees every holder of a shared name.
	ra = testkit.MustTryAcquire(t, a, name, dlock.Shared(), dlock.WithTTL(ttl))
	rb = testkit.MustTryAcquire(t, b, name, dlock.Shared(), dlock.WithTTL(ttl))
	if held, err := w.ForceRelease(t.Context(), name); err != nil || !held {
		t.Fatalf("ForceRelease(%q) of a name two readers hold = %v, %v; want true, nil", name, held, err)
	}
	for _, k := range []*dlock.Lock{ra, rb} {
		waitClosed(t, k.Done(), ttl+slack, "reader's Done after ForceRelease")
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, w, name))
}

// testNoModes replaces the properties of shared locks and semaphores on a
// backend that documents why it has none.
func testNoModes(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	for _, opt := range []dlock.Option{dlock.Shared(), dlock.WithLimit(2)} {
		k, err := a.TryAcquire(t.Context(), name, opt)
		if !errors.Is(err, dlock.ErrUnsupported) {
			if k != nil {
				k.Release(t.Context())
			}
			t.Fatalf("TryAcquire(%q) in a shared or semaphore mode on a backend without them (Harness.NoModes) = %v, want ErrUnsupported", name, err)
		}
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, b, name))
}

func testObserve(t *testing.T, h Harness) {
	o, a, b := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := o.Observe(ctx, name)
	if h.NoAdmin { // Observe reports what Inspect reads
		wantUnsupported(t, "Observe", err)
		return
	}
	if err != nil {
		t.Fatalf("Observe(%q) = %v", name, err)
	}
	want := func(what string, ks ...*dlock.Lock) {
		t.Helper()
		select {
		case infos, ok := <-ch:
			if !ok {
				t.Fatalf("Observe(%q) closed its channel before ctx ended", name)
			}
			var got, wantOwners []string
			for _, in := range infos {
				got = append(got, in.Owner)
			}
			for _, k := range ks {
				wantOwners = append(wantOwners, k.Owner())
			}
			if !slices.Equal(got, wantOwners) || infos == nil {
				t.Fatalf("Observe(%q) sent %v (%+v) %s, want holders %v in fence order (an empty, non-nil slice when free)", name, got, infos, what, wantOwners)
			}
		case <-time.After(settle):
			t.Fatalf("Observe(%q) sent nothing %v %s", name, settle, what)
		}
	}
	want("at first, while free")
	if h.NoModes {
		ka := testkit.MustTryAcquire(t, a, name)
		want("after an acquisition", ka)
		testkit.MustRelease(t, ka)
		want("after the name was freed")
		kb := testkit.MustTryAcquire(t, b, name)
		want("after another owner took it", kb)
		testkit.MustRelease(t, kb)
		want("after it was freed again")
	} else {
		ka := testkit.MustTryAcquire(t, a, name, dlock.Shared())
		want("after a shared acquisition", ka)
		kb := testkit.MustTryAcquire(t, b, name, dlock.Shared())
		want("after a second reader joined", ka, kb)
		testkit.MustRelease(t, ka)
		want("after the first reader left", kb)
		testkit.MustRelease(t, kb)
		want("after the name was freed")
	}
	cancel()
	select {
	case infos, ok := <-ch:
		if ok {
			t.Fatalf("Observe(%q) sent %+v after ctx ended with no change, want the channel closed", name, infos)
		}
	case <-time.After(settle):
		t.Fatalf("Observe(%q) did not close its channel %v after ctx ended", name, settle)
	}
}
