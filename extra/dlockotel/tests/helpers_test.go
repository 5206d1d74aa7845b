package dlockotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlock-go/dlock/extra/dlockotel"
	"github.com/dlock-go/dlock/hook"
)

// telemetry is a hook wired to the SDK's in-memory span recorder and a
// manual metric reader.
type telemetry struct {
	hook   hook.Hook
	tp     *sdktrace.TracerProvider
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newTelemetry(t *testing.T, opts ...dlockotel.Option) *telemetry {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	h, err := dlockotel.NewHook(append([]dlockotel.Option{
		dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatalf("NewHook() = %v, want nil", err)
	}
	return &telemetry{hook: h, tp: tp, spans: rec, reader: reader}
}

// parent starts a span for the test to pass to the Locker's calls.
func (tm *telemetry) parent(ctx context.Context) (context.Context, trace.Span) {
	return tm.tp.Tracer("test").Start(ctx, "test")
}

// collect returns the metrics recorded so far.
func (tm *telemetry) collect(t *testing.T) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect() = %v, want nil", err)
	}
	var ms []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		ms = append(ms, sm.Metrics...)
	}
	return ms
}

// find returns the metric called name, or false.
func find(ms []metricdata.Metrics, name string) (metricdata.Metrics, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return metricdata.Metrics{}, false
}

// sum returns the value of counter or up-down counter name for exactly
// the attributes kvs: 0 if it has no such point.
func (tm *telemetry) sum(t *testing.T, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(tm.collect(t), name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric %s is a %T, want metricdata.Sum[int64]", name, m.Data)
	}
	want := attribute.NewSet(kvs...)
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// count returns how many values histogram name recorded for exactly the
// attributes kvs, and their sum.
func (tm *telemetry) count(t *testing.T, name string, kvs ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	m, ok := find(tm.collect(t), name)
	if !ok {
		return 0, 0
	}
	want := attribute.NewSet(kvs...)
	switch h := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range h.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Count, p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range h.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Count, float64(p.Sum)
			}
		}
	default:
		t.Fatalf("metric %s is a %T, want a histogram", name, m.Data)
	}
	return 0, 0
}

// ended returns the ended spans called name.
func (tm *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var spans []sdktrace.ReadOnlySpan
	for _, s := range tm.spans.Ended() {
		if s.Name() == name {
			spans = append(spans, s)
		}
	}
	return spans
}

// one returns the only ended span called name.
func (tm *telemetry) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := tm.ended(name)
	if len(spans) != 1 {
		t.Fatalf("ended %s spans: %d, want 1", name, len(spans))
	}
	return spans[0]
}

// attr returns the value of span s's attribute key, and whether it has it.
func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttr fails the test unless span s has attribute key = want.
func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string, want any) {
	t.Helper()
	v, ok := attr(s, key)
	if !ok {
		t.Errorf("%s span: no attribute %s, want %v", s.Name(), key, want)
		return
	}
	if got := v.AsInterface(); got != want {
		t.Errorf("%s span: %s = %v (%T), want %v (%T)", s.Name(), key, got, got, want, want)
	}
}

// wantChild fails the test unless span s is a child of parent.
func wantChild(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.Span) {
	t.Helper()
	if got, want := s.Parent().SpanID(), parent.SpanContext().SpanID(); got != want {
		t.Errorf("%s span: parent %v, want %v (the caller's span)", s.Name(), got, want)
	}
	if got, want := s.SpanContext().TraceID(), parent.SpanContext().TraceID(); got != want {
		t.Errorf("%s span: trace %v, want %v (the caller's)", s.Name(), got, want)
	}
}

var (
	memory   = attribute.String("backend", "memory")
	acquired = attribute.String("outcome", "acquired")
	released = attribute.String("outcome", "released")
)

// pointSets returns the attribute sets of metric m's points.
func pointSets(t *testing.T, m metricdata.Metrics) []attribute.Set {
	t.Helper()
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	default:
		t.Fatalf("metric %s is a %T, want a sum or a histogram", m.Name, m.Data)
	}
	return sets
}
