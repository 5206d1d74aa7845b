package dlockotel_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockotel"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// TestContendedAcquisition: A holds "x", B waits for it for a second
// (synctest's), A releases and B gets it; two Lockers on one store share
// the hook.
func TestContendedAcquisition(t *testing.T) {
	synctest.Test(t, testContendedAcquisition)
}

func testContendedAcquisition(t *testing.T) {
	tm := newTelemetry(t)
	store := memlock.NewStore()
	la, lb := testkit.MemLocker(t, store), testkit.MemLocker(t, store)

	// A's probe runs after the hook has counted A's release; B's
	// AcquireDone waits for it, so the held gauge is seen at 0 between.
	aReleased := make(chan struct{})
	var heldAtRelease int64
	la.AddHook(tm.hook)
	la.AddHook(hook.Hook{Released: func(context.Context, hook.Release) {
		heldAtRelease = tm.sum(t, "dlock.held", memory)
		close(aReleased)
	}})
	bStarted := make(chan struct{})
	var bDone hook.AcquireDone
	lb.AddHook(hook.Hook{AcquireDone: func(_ context.Context, e hook.AcquireDone) {
		<-aReleased
		bDone = e
	}})
	lb.AddHook(tm.hook)
	lb.AddHook(hook.Hook{AcquireStart: func(context.Context, hook.AcquireStart) context.Context {
		close(bStarted)
		return nil
	}})

	ctx := t.Context()
	a, err := la.Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("A: Acquire(x) = %v, want nil", err)
	}
	if got := tm.sum(t, "dlock.held", memory); got != 1 {
		t.Errorf("dlock.held after A's Acquire = %d, want 1", got)
	}

	bctx, bParent := tm.parent(ctx)
	var b *dlock.Lock
	var bErr error
	var wg sync.WaitGroup
	wg.Go(func() { b, bErr = lb.Acquire(bctx, "x") })
	<-bStarted
	synctest.Wait() // B found x held and waits
	if got := tm.sum(t, "dlock.waiters", memory); got != 1 {
		t.Errorf("dlock.waiters while B waits = %d, want 1", got)
	}
	time.Sleep(time.Second)
	if err := a.Release(ctx); err != nil {
		t.Fatalf("A: Release = %v, want nil", err)
	}
	wg.Wait()
	bParent.End()
	if bErr != nil {
		t.Fatalf("B: Acquire(x) = %v, want nil", bErr)
	}
	if heldAtRelease != 0 {
		t.Errorf("dlock.held after A's Release = %d, want 0", heldAtRelease)
	}
	if got := tm.sum(t, "dlock.held", memory); got != 1 {
		t.Errorf("dlock.held after B's Acquire = %d, want 1", got)
	}
	if got := tm.sum(t, "dlock.waiters", memory); got != 0 {
		t.Errorf("dlock.waiters after B's Acquire = %d, want 0", got)
	}

	// B's span: a child of the caller's, covering the wait.
	var bSpan, aSpan []string
	for _, s := range tm.ended("dlock.acquire") {
		v, _ := attr(s, "dlock.contended")
		if v.AsBool() {
			bSpan = append(bSpan, s.SpanContext().SpanID().String())
			wantChild(t, s, bParent)
			wantAttr(t, s, "dlock.backend", "memory")
			wantAttr(t, s, "dlock.wait", true)
			wantAttr(t, s, "dlock.mode", "exclusive")
			wantAttr(t, s, "dlock.outcome", "acquired")
			wantAttr(t, s, "dlock.fence", int64(b.Fence()))
			wantAttr(t, s, "dlock.attempts", int64(bDone.Attempts))
			if bDone.Attempts < 1 {
				t.Errorf("B's AcquireDone: Attempts = %d, want >= 1", bDone.Attempts)
			}
			if _, ok := attr(s, "dlock.queue.ahead"); ok {
				t.Errorf("B's span has dlock.queue.ahead, want none (memlock does not queue)")
			}
			if got := s.SpanKind(); got != trace.SpanKindClient {
				t.Errorf("B's span: kind %v, want %v", got, trace.SpanKindClient)
			}
			if got := s.Status().Code; got != codes.Unset {
				t.Errorf("B's span: status %v, want Unset", got)
			}
			if got := s.EndTime().Sub(s.StartTime()); got != time.Second {
				t.Errorf("B's span lasted %v, want the wait's 1s", got)
			}
		} else {
			aSpan = append(aSpan, s.SpanContext().SpanID().String())
			wantAttr(t, s, "dlock.fence", int64(a.Fence()))
			wantAttr(t, s, "dlock.outcome", "acquired")
		}
	}
	if len(bSpan) != 1 || len(aSpan) != 1 {
		t.Fatalf("dlock.acquire spans: %d contended and %d not, want 1 and 1", len(bSpan), len(aSpan))
	}

	if got := tm.sum(t, "dlock.acquisitions", memory, acquired); got != 2 {
		t.Errorf("dlock.acquisitions{acquired} = %d, want 2", got)
	}
	if got := tm.sum(t, "dlock.contentions", memory); got != 1 {
		t.Errorf("dlock.contentions = %d, want 1", got)
	}
	if got, _ := tm.count(t, "dlock.acquire.duration", memory, acquired); got != 2 {
		t.Errorf("dlock.acquire.duration{acquired} count = %d, want 2", got)
	}
	if got, sum := tm.count(t, "dlock.acquire.wait", memory); got != 1 || sum != 1 {
		t.Errorf("dlock.acquire.wait: count %d, sum %v s, want 1 and 1 s", got, sum)
	}
	if got, _ := tm.count(t, "dlock.queue.ahead", memory); got != 0 {
		t.Errorf("dlock.queue.ahead count = %d, want 0 (memlock does not queue)", got)
	}
	if got := tm.sum(t, "dlock.releases", memory, released); got != 1 {
		t.Errorf("dlock.releases{released} = %d, want 1", got)
	}

	if err := b.Release(ctx); err != nil {
		t.Fatalf("B: Release = %v, want nil", err)
	}
	if got := tm.sum(t, "dlock.held", memory); got != 0 {
		t.Errorf("dlock.held after B's Release = %d, want 0", got)
	}
	if got := tm.sum(t, "dlock.releases", memory, released); got != 2 {
		t.Errorf("dlock.releases{released} = %d, want 2", got)
	}
	if got, _ := tm.count(t, "dlock.hold.duration", memory); got != 2 {
		t.Errorf("dlock.hold.duration count = %d, want 2", got)
	}
}

// TestRelease: a Release makes a dlock.release span in the caller's
// trace, spanning the store call; Close makes one marked closed.
func TestRelease(t *testing.T) {
	tm := newTelemetry(t)
	l := testkit.MemLocker(t, nil)
	l.AddHook(tm.hook)
	var events []hook.Release
	l.AddHook(hook.Hook{Released: func(_ context.Context, e hook.Release) { events = append(events, e) }})
	ctx, parent := tm.parent(t.Context())
	k, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("Acquire(x) = %v, want nil", err)
	}
	before := time.Now()
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	after := time.Now()
	parent.End()

	s := tm.one(t, "dlock.release")
	wantChild(t, s, parent)
	wantAttr(t, s, "dlock.backend", "memory")
	wantAttr(t, s, "dlock.outcome", "released")
	wantAttr(t, s, "dlock.fence", int64(k.Fence()))
	wantAttr(t, s, "dlock.closed", false)
	if v, ok := attr(s, "dlock.held_ms"); !ok || v.AsFloat64() <= 0 {
		t.Errorf("release span: dlock.held_ms = %v (present %v), want > 0", v.AsFloat64(), ok)
	}
	if s.StartTime().Before(before) || s.EndTime().After(after) {
		t.Errorf("release span: %v to %v, want within the Release call, %v to %v", s.StartTime(), s.EndTime(), before, after)
	}
	if got, want := s.EndTime().Sub(s.StartTime()), events[0].Duration; got != want {
		t.Errorf("release span lasted %v, want the store call's %v", got, want)
	}
	if got := s.Status().Code; got != codes.Unset {
		t.Errorf("release span: status %v, want Unset", got)
	}
	if got := tm.sum(t, "dlock.releases", memory, released); got != 1 {
		t.Errorf("dlock.releases{released} = %d, want 1", got)
	}

	k2, err := l.Acquire(ctx, "y")
	if err != nil {
		t.Fatalf("Acquire(y) = %v, want nil", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	spans := tm.ended("dlock.release")
	if len(spans) != 2 {
		t.Fatalf("dlock.release spans after Close: %d, want 2", len(spans))
	}
	wantAttr(t, spans[1], "dlock.closed", true)
	wantAttr(t, spans[1], "dlock.fence", int64(k2.Fence()))
	wantChild(t, spans[1], parent)
	if got := tm.sum(t, "dlock.releases", memory, released); got != 2 {
		t.Errorf("dlock.releases{released} after Close = %d, want 2", got)
	}
	if got := tm.sum(t, "dlock.held", memory); got != 0 {
		t.Errorf("dlock.held after Close = %d, want 0", got)
	}
}

// TestLockName: names are in no span and no metric by default; with
// WithLockName, in both as the function maps them.
func TestLockName(t *testing.T) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
	for _, tc := range []struct {
		desc string
		opts []dlockotel.Option
		want string // "" for none
	}{
		{desc: "default"},
		{desc: "WithLockName", opts: []dlockotel.Option{dlockotel.WithLockName(prefix)}, want: "jobs"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tm := newTelemetry(t, tc.opts...)
			l := testkit.MemLocker(t, nil)
			l.AddHook(tm.hook)
			ctx := t.Context()
			for _, name := range []string{"jobs/a", "jobs/b"} {
				k, err := l.Acquire(ctx, name)
				if err != nil {
					t.Fatalf("Acquire(%q) = %v, want nil", name, err)
				}
				if err := k.Release(ctx); err != nil {
					t.Fatalf("Release(%q) = %v, want nil", name, err)
				}
			}
			spans := append(tm.ended("dlock.acquire"), tm.ended("dlock.release")...)
			if len(spans) != 4 {
				t.Fatalf("acquire and release spans: %d, want 4", len(spans))
			}
			for _, s := range spans {
				v, ok := attr(s, "dlock.name")
				if tc.want == "" && ok {
					t.Errorf("%s span: dlock.name = %q, want none", s.Name(), v.AsString())
				}
				if tc.want != "" && v.AsString() != tc.want {
					t.Errorf("%s span: dlock.name = %q, want %q", s.Name(), v.AsString(), tc.want)
				}
			}
			want := []attribute.KeyValue{memory, acquired}
			if tc.want != "" {
				want = append(want, attribute.String("name", tc.want))
			}
			if got := tm.sum(t, "dlock.acquisitions", want...); got != 2 {
				t.Errorf("dlock.acquisitions%v = %d, want 2", want, got)
			}
			for _, m := range tm.collect(t) {
				if strings.HasPrefix(m.Name, "dlock.renewal") {
					continue // batches mix names: never named
				}
				for _, set := range pointSets(t, m) {
					v, ok := set.Value("name")
					if tc.want == "" && ok {
						t.Errorf("metric %s: a point with name=%q, want none", m.Name, v.AsString())
					}
					if tc.want != "" && v.AsString() != tc.want {
						t.Errorf("metric %s: a point with name=%q, want %q", m.Name, v.AsString(), tc.want)
					}
				}
			}
		})
	}
}
