package dlockotel

import (
	"context"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlock-go/dlock/hook"
)

// Span attribute keys.
const (
	attrBackend   = attribute.Key("dlock.backend")
	attrName      = attribute.Key("dlock.name")
	attrWait      = attribute.Key("dlock.wait")
	attrMode      = attribute.Key("dlock.mode")
	attrLimit     = attribute.Key("dlock.limit")
	attrTTL       = attribute.Key("dlock.ttl_ms")
	attrOutcome   = attribute.Key("dlock.outcome")
	attrFence     = attribute.Key("dlock.fence")
	attrAttempts  = attribute.Key("dlock.attempts")
	attrContended = attribute.Key("dlock.contended")
	attrAhead     = attribute.Key("dlock.queue.ahead")
	attrHeld      = attribute.Key("dlock.held_ms")
	attrClosed    = attribute.Key("dlock.closed")
	attrReason    = attribute.Key("dlock.reason")
	attrCause     = attribute.Key("dlock.cause")
)

// clientSpan is the start option of the spans of calls to the store.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// spanKey is the context key of a hook's acquisition span. The span is
// kept under the hook's own key, not only as the context's current span,
// because a later hook's AcquireStart may start a span of its own.
type spanKey struct{ h *otelHook }

// lockAttrs returns the metric attribute sets of a lock of backend.
func (h *otelHook) lockAttrs(backend, name string) *lockAttrs {
	b := h.attrs.backend(backend)
	if h.name == nil {
		return b.lock
	}
	return b.forName(h.name(name))
}

// withName appends the mapped name to a span's attributes, if names are on.
func (h *otelHook) withName(kvs []attribute.KeyValue, name string) []attribute.KeyValue {
	if h.name == nil {
		return kvs
	}
	return append(kvs, attrName.String(h.name(name)))
}

func (h *otelHook) acquireStart(ctx context.Context, e hook.AcquireStart) context.Context {
	if e.Wait {
		h.m.waiters.Add(ctx, 1, h.lockAttrs(e.Backend, e.Name).base.add...)
	}
	sctx, span := h.tracer.Start(ctx, "dlock.acquire", clientSpan...)
	if !span.IsRecording() {
		return nil // nothing to end: AcquireDone finds no span
	}
	kvs := make([]attribute.KeyValue, 0, 8)
	kvs = append(kvs, attrBackend.String(e.Backend), attrWait.Bool(e.Wait), attrMode.String(mode(e)))
	if e.Limit > 0 {
		kvs = append(kvs, attrLimit.Int(e.Limit))
	}
	if e.TTL > 0 {
		kvs = append(kvs, attrTTL.Int64(e.TTL.Milliseconds()))
	}
	span.SetAttributes(h.withName(kvs, e.Name)...)
	return context.WithValue(sctx, spanKey{h}, span)
}

func (h *otelHook) acquireDone(ctx context.Context, e hook.AcquireDone) {
	a := h.lockAttrs(e.Backend, e.Name)
	if e.Wait {
		h.m.waiters.Add(ctx, -1, a.base.add...)
	}
	om := a.acquire(e.Outcome)
	took := e.Duration.Seconds()
	h.m.acquireDuration.Record(ctx, took, om.rec...)
	h.m.acquisitions.Add(ctx, 1, om.add...)
	if e.Contended {
		h.m.contentions.Add(ctx, 1, a.base.add...)
	}
	if e.Outcome == hook.Acquired {
		h.m.held.Add(ctx, 1, a.base.add...)
		if e.Contended {
			h.m.acquireWait.Record(ctx, took, a.base.rec...)
		}
	}
	if e.Ahead >= 0 {
		h.m.queueAhead.Record(ctx, int64(e.Ahead), a.base.rec...)
	}

	span, _ := ctx.Value(spanKey{h}).(trace.Span)
	if span == nil {
		return
	}
	kvs := make([]attribute.KeyValue, 0, 5)
	kvs = append(kvs, attrOutcome.String(e.Outcome.String()), attrAttempts.Int(e.Attempts), attrContended.Bool(e.Contended))
	if e.Outcome == hook.Acquired {
		kvs = append(kvs, fenceAttr(e.Fence))
	}
	if e.Ahead >= 0 {
		kvs = append(kvs, attrAhead.Int(e.Ahead))
	}
	span.SetAttributes(kvs...)
	if e.Outcome == hook.AcquireFailed {
		span.SetStatus(codes.Error, errText(e.Err))
	}
	span.End()
}

func (h *otelHook) reentered(ctx context.Context, e hook.Reentry) {
	h.m.reentries.Add(ctx, 1, h.lockAttrs(e.Backend, e.Name).base.add...)
}

func (h *otelHook) renewed(e hook.Renewal) {
	ctx := context.Background()
	b := h.attrs.backend(e.Backend)
	for i, n := range [...]int{renewRenewed: e.Renewed, renewNotHeld: e.NotHeld, renewFailed: e.Failed} {
		if n > 0 {
			h.m.renewals.Add(ctx, int64(n), b.renewals[i].add...)
		}
	}
	if n := e.NotHeld + e.Failed; n > 0 {
		h.m.renewalFailures.Add(ctx, int64(n), b.lock.base.add...)
	}
	h.m.renewalDuration.Record(ctx, e.Duration.Seconds(), b.lock.base.rec...)
}

func (h *otelHook) lost(ctx context.Context, e hook.Loss) {
	a := h.lockAttrs(e.Backend, e.Name)
	h.m.losses.Add(ctx, 1, a.loss(e.Reason).add...)
	h.holdEnded(ctx, a, e.Held)

	now := time.Now()
	_, span := h.tracer.Start(ctx, "dlock.lost", trace.WithTimestamp(now))
	if span.IsRecording() {
		span.SetAttributes(h.withName([]attribute.KeyValue{attrBackend.String(e.Backend), fenceAttr(e.Fence),
			attrReason.String(e.Reason.String()), attrCause.String(errText(e.Cause)), heldAttr(e.Held)}, e.Name)...)
		span.SetStatus(codes.Error, errText(e.Cause))
	}
	span.End(trace.WithTimestamp(now))
}

// holdEnded records the end of a hold that lasted held: by its release
// or its loss, the one end each acquisition has.
func (h *otelHook) holdEnded(ctx context.Context, a *lockAttrs, held time.Duration) {
	h.m.holdDuration.Record(ctx, held.Seconds(), a.base.rec...)
	h.m.held.Add(ctx, -1, a.base.add...)
}

func (h *otelHook) released(ctx context.Context, e hook.Release) {
	a := h.lockAttrs(e.Backend, e.Name)
	h.m.releases.Add(ctx, 1, a.release(e.Outcome).add...)
	h.holdEnded(ctx, a, e.Held)

	now := time.Now()
	_, span := h.tracer.Start(ctx, "dlock.release", clientSpan[0], trace.WithTimestamp(now.Add(-e.Duration)))
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(h.withName([]attribute.KeyValue{attrBackend.String(e.Backend), fenceAttr(e.Fence),
		attrOutcome.String(e.Outcome.String()), heldAttr(e.Held), attrClosed.Bool(e.Closed)}, e.Name)...)
	if e.Outcome == hook.ReleaseFailed {
		span.SetStatus(codes.Error, errText(e.Err))
	}
	span.End(trace.WithTimestamp(now))
}

// mode names an acquisition's mode: exclusive, shared or semaphore.
func mode(e hook.AcquireStart) string {
	switch {
	case e.Limit > 0:
		return "semaphore"
	case e.Shared:
		return "shared"
	default:
		return "exclusive"
	}
}

// fenceAttr is the dlock.fence attribute: an int, or a decimal string for a
// token beyond the range of int64.
func fenceAttr(f uint64) attribute.KeyValue {
	if f > math.MaxInt64 {
		return attrFence.String(strconv.FormatUint(f, 10))
	}
	return attrFence.Int64(int64(f))
}

// heldAttr is the dlock.held_ms attribute, in fractional milliseconds.
func heldAttr(d time.Duration) attribute.KeyValue {
	return attrHeld.Float64(float64(d) / float64(time.Millisecond))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
