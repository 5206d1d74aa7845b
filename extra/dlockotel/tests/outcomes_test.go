package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// TestOutcomes: every way an acquisition ends, a re-entry, renewals and a
// loss found by a renewal, on memlock in synctest's time.
func TestOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		store := memlock.NewStore()
		l, other := testkit.MemLocker(t, store), testkit.MemLocker(t, store)
		l.AddHook(tm.hook)
		ctx := t.Context()

		held, err := other.Acquire(ctx, "x")
		if err != nil {
			t.Fatalf("other: Acquire(x) = %v, want nil", err)
		}
		if _, err := l.TryAcquire(ctx, "x"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire(x) = %v, want ErrNotAcquired", err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = l.Acquire(wctx, "x")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire(x) with a 1 s timeout = %v, want DeadlineExceeded", err)
		}
		_, clash := l.TryAcquire(ctx, "x", dlock.WithLimit(2))
		if clash == nil || errors.Is(clash, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire(x, WithLimit(2)) on a held lock = %v, want a mode clash", clash)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatalf("other: Release = %v, want nil", err)
		}

		spans := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range tm.ended("dlock.acquire") {
			v, _ := attr(s, "dlock.outcome")
			spans[v.AsString()] = s
		}
		for outcome, want := range map[string]codes.Code{"not_acquired": codes.Unset, "canceled": codes.Unset, "error": codes.Error} {
			s, ok := spans[outcome]
			if !ok {
				t.Errorf("no dlock.acquire span with outcome %s", outcome)
				continue
			}
			if got := s.Status().Code; got != want {
				t.Errorf("%s acquire span: status %v, want %v", outcome, got, want)
			}
			wantAttr(t, s, "dlock.contended", outcome != "error")
			if _, ok := attr(s, "dlock.fence"); ok {
				t.Errorf("%s acquire span has dlock.fence, want none", outcome)
			}
		}
		if s := spans["error"]; s != nil {
			if got, want := s.Status().Description, clash.Error(); got != want {
				t.Errorf("error acquire span: status description %q, want the error's text (%q)", got, want)
			}
			wantAttr(t, s, "dlock.mode", "semaphore")
			wantAttr(t, s, "dlock.limit", int64(2))
		}
		if s := spans["canceled"]; s != nil {
			wantAttr(t, s, "dlock.wait", true)
			if got := s.EndTime().Sub(s.StartTime()); got != time.Second {
				t.Errorf("canceled acquire span lasted %v, want the 1 s timeout", got)
			}
		}
		for outcome, want := range map[string]int64{"acquired": 0, "not_acquired": 1, "canceled": 1, "error": 1} {
			if got := tm.sum(t, "dlock.acquisitions", memory, attribute.String("outcome", outcome)); got != want {
				t.Errorf("dlock.acquisitions{%s} = %d, want %d", outcome, got, want)
			}
		}
		if got := tm.sum(t, "dlock.contentions", memory); got != 2 {
			t.Errorf("dlock.contentions = %d, want 2 (TryAcquire and the canceled Acquire)", got)
		}
		if got, _ := tm.count(t, "dlock.acquire.wait", memory); got != 0 {
			t.Errorf("dlock.acquire.wait count = %d, want 0 (no handoff)", got)
		}
		if got := tm.sum(t, "dlock.waiters", memory); got != 0 {
			t.Errorf("dlock.waiters = %d, want 0", got)
		}

		// A re-entry, then one renewal (at a third of the TTL), then a
		// loss found by the next renewal.
		k, err := l.Acquire(ctx, "y", dlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatalf("Acquire(y) = %v, want nil", err)
		}
		k2, err := l.Acquire(k.Context(), "y")
		if err != nil {
			t.Fatalf("Acquire(y) re-entering = %v, want nil", err)
		}
		if got := tm.sum(t, "dlock.reentries", memory); got != 1 {
			t.Errorf("dlock.reentries = %d, want 1", got)
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		renewed := attribute.String("outcome", "renewed")
		if got := tm.sum(t, "dlock.renewals", memory, renewed); got != 1 {
			t.Errorf("dlock.renewals{renewed} after 1.5 s = %d, want 1", got)
		}
		if got, _ := tm.count(t, "dlock.renewal.duration", memory); got != 1 {
			t.Errorf("dlock.renewal.duration count = %d, want 1", got)
		}
		store.Expire("y")
		<-k.Done()
		synctest.Wait() // the keeper reports the loss and the batch after Done closed
		if got := tm.sum(t, "dlock.losses", memory, attribute.String("reason", "not_held")); got != 1 {
			t.Errorf("dlock.losses{not_held} = %d, want 1", got)
		}
		if got := tm.sum(t, "dlock.renewals", memory, attribute.String("outcome", "not_held")); got != 1 {
			t.Errorf("dlock.renewals{not_held} = %d, want 1", got)
		}
		if got := tm.sum(t, "dlock.renewal.failures", memory); got != 1 {
			t.Errorf("dlock.renewal.failures = %d, want 1", got)
		}
		s := tm.one(t, "dlock.lost")
		wantAttr(t, s, "dlock.reason", "not_held")
		wantAttr(t, s, "dlock.fence", int64(k.Fence()))
		_ = k2.Release(ctx)
		_ = k.Release(ctx)
		if got := tm.sum(t, "dlock.held", memory); got != 0 {
			t.Errorf("dlock.held = %d, want 0 (the re-entry holds nothing more)", got)
		}
		if n := len(tm.ended("dlock.release")); n != 0 {
			t.Errorf("dlock.release spans: %d, want 0 (the lock was lost)", n)
		}
	})
}
