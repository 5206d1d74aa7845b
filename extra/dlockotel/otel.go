// Package dlockotel reports a dlock.Locker's work to OpenTelemetry: a span
// per acquisition (covering its wait), per release and per loss, and the
// metrics dlock documents in its README ("Observing locks").
//
// Wire it with Locker.AddHook:
//
//	h, err := dlockotel.NewHook()
//	if err != nil {
//		return err
//	}
//	locker.AddHook(h)
//
// The spans, children of the span in the call's context:
//
//   - dlock.acquire (kind client), one per Acquire or TryAcquire that does
//     not re-enter, from its start to its return, so it covers the wait.
//     Attributes: dlock.backend, dlock.wait, dlock.mode (exclusive, shared
//     or semaphore), dlock.limit (a semaphore's), dlock.ttl_ms (whole milliseconds), and at the
//     end dlock.outcome (acquired, not_acquired, canceled, error),
//     dlock.attempts, dlock.contended, dlock.fence (when acquired) and
//     dlock.queue.ahead (where the store tells). Its status is Error, with
//     the error's text, only for the outcome error.
//   - dlock.release (kind client), one per lock freed on the store, over
//     the store call. Attributes: dlock.backend, dlock.fence,
//     dlock.outcome (released, not_held, error), dlock.held_ms (how long
//     the lock was held, in fractional milliseconds) and dlock.closed
//     (freed by Locker.Close). Status Error for the outcome error.
//   - dlock.lost, a span of zero length per lost lock, in the trace of the
//     call that acquired it. Attributes: dlock.backend, dlock.fence,
//     dlock.reason (expired, not_held, reported), dlock.cause and
//     dlock.held_ms. Status Error, with the cause.
//
// The hook builds span attributes only for spans that record. When the
// acquisition span does not record (not sampled, or a no-op provider),
// AcquireStart passes the caller's context on unchanged.
//
// Lock names are neither span attributes nor metric attributes unless
// WithLockName is given: names can carry user data, and as metric
// attributes they have unbounded cardinality.
package dlockotel

import (
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlock-go/dlock/hook"
)

// ScopeName is the instrumentation scope of the hook's tracer and meter.
const ScopeName = "github.com/dlock-go/dlock/extra/dlockotel"

// Option configures NewHook.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	name func(string) string
}

// WithTracerProvider makes the hook create its spans with tp. A nil tp
// means the default. Default: otel.GetTracerProvider() when NewHook is
// called (the global provider, which forwards to one set later).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider makes the hook record its metrics with mp. A nil mp
// means the default. Default: otel.GetMeterProvider() when NewHook is
// called (the global provider, which forwards to one set later).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithLockName adds lock names to the hook's telemetry, as f maps them:
// spans get the attribute dlock.name = f(name), and the metrics of
// per-lock events (all but the renewal metrics, whose batches mix names)
// get the attribute name = f(name). Let f return a bounded set of values,
// such as a prefix of the name, to bound the metrics' cardinality. A nil
// f means no names. Default: no names.
func WithLockName(f func(name string) string) Option {
	return func(c *config) { c.name = f }
}

// NewHook returns a hook.Hook that reports to OpenTelemetry; add it to a
// Locker with Locker.AddHook. One hook may serve several Lockers. It
// creates its instruments once, here, and returns an error if the meter
// provider refuses one.
func NewHook(opts ...Option) (hook.Hook, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	m, err := newInstruments(c.mp.Meter(ScopeName))
	if err != nil {
		return hook.Hook{}, fmt.Errorf("dlockotel: new hook: %w", err)
	}
	h := &otelHook{
		tracer: c.tp.Tracer(ScopeName),
		m:      m,
		name:   c.name,
		attrs:  newAttrCache(),
	}
	return hook.Hook{
		AcquireStart: h.acquireStart,
		AcquireDone:  h.acquireDone,
		Reentered:    h.reentered,
		Renewed:      h.renewed,
		Lost:         h.lost,
		Released:     h.released,
	}, nil
}

// otelHook holds what the callbacks of one NewHook share.
type otelHook struct {
	tracer trace.Tracer
	m      *instruments
	name   func(string) string // nil: no names
	attrs  *attrCache
}
