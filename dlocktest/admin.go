package dlocktest

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

func testInspect(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	name, free := uniqueName(t, "/{held} ü"), uniqueName(t, "-free")
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(10*time.Second), dlock.WithMetadata("host=test pid=1"))
	infos, err := b.Inspect(t.Context(), name, free)
	if h.NoAdmin {
		wantUnsupported(t, "Inspect", err)
		return
	}
	if err != nil {
		t.Fatalf("Inspect(%q, %q) = %v, want nil", name, free, err)
	}
	if len(infos) != 1 {
		t.Fatalf("Inspect(%q, %q) = %+v, want one holder", name, free, infos)
	}
	got := infos[0]
	if got.Name != name || got.Fence != k.Fence() || got.Owner == "" || got.Metadata != "host=test pid=1" {
		t.Errorf("Inspect(%q) = %+v, want name, fence %d, an owner and the metadata", name, got, k.Fence())
	}
	if got.Remaining > 10*time.Second {
		t.Errorf("Inspect(%q).Remaining = %v, want at most the 10s TTL", name, got.Remaining)
	}
	all, err := b.Inspect(t.Context())
	if err != nil {
		t.Fatalf("Inspect() = %v, want nil", err)
	}
	found := false
	for _, i := range all {
		found = found || i.Name == name
	}
	if !found {
		t.Errorf("Inspect() of all names lacks %q", name)
	}
	testkit.MustRelease(t, k)
	if infos, err := b.Inspect(t.Context(), name); err != nil || len(infos) != 0 {
		t.Errorf("Inspect(%q) after Release = %+v, %v; want no holder", name, infos, err)
	}
}

func testForceRelease(t *testing.T, h Harness) {
	a, b, admin := newLocker(t, h), newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(h.ttl()))
	got := testkit.AcquireAsync(t.Context(), b, name)
	held, err := admin.ForceRelease(t.Context(), name)
	if h.NoAdmin {
		wantUnsupported(t, "ForceRelease", err)
		testkit.MustRelease(t, k)
		if r := <-got; r.Err == nil {
			testkit.MustRelease(t, r.Lock)
		}
		return
	}
	if err != nil || !held {
		t.Fatalf("ForceRelease(%q) = %v, %v; want true, nil", name, held, err)
	}
	waitClosed(t, k.Done(), h.ttl()+slack, "holder's Done after ForceRelease")
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("waiting Acquire(%q) after ForceRelease = %v, want a lock", name, r.Err)
		}
		if r.Lock.Fence() <= k.Fence() {
			t.Errorf("Fence after ForceRelease = %d, want > %d", r.Lock.Fence(), k.Fence())
		}
		testkit.MustRelease(t, r.Lock)
	case <-time.After(h.ttl() + slack):
		t.Fatalf("waiter not woken %v after ForceRelease", h.ttl()+slack)
	}
	if held, err := admin.ForceRelease(t.Context(), name); err != nil || held {
		t.Errorf("ForceRelease(%q) of a free name = %v, %v; want false, nil", name, held, err)
	}
}

// wantUnsupported checks that op, on a backend whose Harness says it has
// no administration (NoAdmin), failed with dlock.ErrUnsupported.
func wantUnsupported(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("%s on a backend without it (Harness.NoAdmin) = %v, want ErrUnsupported", op, err)
	}
}
