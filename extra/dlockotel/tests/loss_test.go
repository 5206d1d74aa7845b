package dlockotel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// TestLossPausedRedis: a lock whose Redis stops answering is lost when
// its lease can no longer be renewed in time, and the hook reports the
// loss in the acquiring call's trace.
func TestLossPausedRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	l, err := redislock.New(srv.Client(t), nil)
	if err != nil {
		t.Fatalf("redislock.New() = %v, want nil", err)
	}
	tm := newTelemetry(t)
	l.AddHook(tm.hook)
	// renewals adds up the renewal batches the hook was told of.
	var mu sync.Mutex
	var renewals hook.Renewal
	batches := 0
	failed := make(chan struct{}, 1)
	l.AddHook(hook.Hook{Renewed: func(e hook.Renewal) {
		mu.Lock()
		defer mu.Unlock()
		if e.Failed > 0 {
			select {
			case failed <- struct{}{}:
			default:
			}
		}
		batches++
		renewals.Renewed += e.Renewed
		renewals.NotHeld += e.NotHeld
		renewals.Failed += e.Failed
	}})

	ctx, parent := tm.parent(t.Context())
	k, err := l.Acquire(ctx, "x", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("Acquire(x) = %v, want nil", err)
	}
	srv.Pause(t)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		srv.Resume(t)
		t.Fatalf("Done() still open 20 s after the server was paused, with a TTL of 1 s")
	}
	// The renewal tried while the server was paused fails when the
	// client gives up (its ReadTimeout, 3 s by default, as go-redis does
	// not follow the context's deadline unless ContextTimeoutEnabled):
	// its event comes after the loss. Wait for it, but do not require
	// it: a keeper delayed past the loss deadline loses the lock without
	// trying a renewal.
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Logf("no failed renewal reported: the lock was lost before a renewal was tried")
	}
	srv.Resume(t)
	// Close stops the renewals: no event comes after it.
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	parent.End()

	s := tm.one(t, "dlock.lost")
	wantChild(t, s, parent)
	wantAttr(t, s, "dlock.backend", "redis")
	wantAttr(t, s, "dlock.reason", "expired")
	wantAttr(t, s, "dlock.fence", int64(k.Fence()))
	wantAttr(t, s, "dlock.cause", context.Cause(k.Context()).Error())
	if got := s.Status(); got.Code != codes.Error || got.Description != context.Cause(k.Context()).Error() {
		t.Errorf("lost span: status %v %q, want Error %q", got.Code, got.Description, context.Cause(k.Context()))
	}
	if !s.EndTime().Equal(s.StartTime()) {
		t.Errorf("lost span: %v to %v, want zero length", s.StartTime(), s.EndTime())
	}
	if n := len(tm.ended("dlock.release")); n != 0 {
		t.Errorf("dlock.release spans: %d, want 0 (the lock was lost)", n)
	}

	redis := attribute.String("backend", "redis")
	if got := tm.sum(t, "dlock.losses", redis, attribute.String("reason", "expired")); got != 1 {
		t.Errorf("dlock.losses{expired} = %d, want 1", got)
	}
	if got := tm.sum(t, "dlock.held", redis); got != 0 {
		t.Errorf("dlock.held = %d, want 0", got)
	}
	if got, _ := tm.count(t, "dlock.hold.duration", redis); got != 1 {
		t.Errorf("dlock.hold.duration count = %d, want 1", got)
	}
	// Which renewals were tried before the loss depends on scheduling;
	// the metrics must agree with the events exactly, and a paused
	// server never answers that a lease is not held.
	mu.Lock()
	defer mu.Unlock()
	t.Logf("renewal batches: %d (renewed %d, failed %d)", batches, renewals.Renewed, renewals.Failed)
	if renewals.NotHeld != 0 {
		t.Errorf("renewals found not held: %d, want 0", renewals.NotHeld)
	}
	for outcome, want := range map[string]int{"renewed": renewals.Renewed, "not_held": 0, "failed": renewals.Failed} {
		if got := tm.sum(t, "dlock.renewals", redis, attribute.String("outcome", outcome)); got != int64(want) {
			t.Errorf("dlock.renewals{%s} = %d, want %d", outcome, got, want)
		}
	}
	if got := tm.sum(t, "dlock.renewal.failures", redis); got != int64(renewals.Failed) {
		t.Errorf("dlock.renewal.failures = %d, want %d", got, renewals.Failed)
	}
	if got, _ := tm.count(t, "dlock.renewal.duration", redis); got != uint64(batches) {
		t.Errorf("dlock.renewal.duration count = %d, want %d", got, batches)
	}
}
