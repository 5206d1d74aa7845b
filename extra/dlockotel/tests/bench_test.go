package dlockotel_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dlock-go/dlock/extra/dlockotel"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

// sdkMeter returns an SDK MeterProvider with a manual reader.
func sdkMeter(b *testing.B) metric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkHookCost measures an uncontended TryAcquire and Release on
// memlock with no hook; the slog hook at Info (which logs none of these
// events); the OpenTelemetry hook with no-op providers (its own cost);
// with a no-op tracer provider and the SDK's MeterProvider (metrics
// recorded, read by a manual reader); and with the SDK's tracer too,
// whose batching exporter discards the spans.
func BenchmarkHookCost(b *testing.B) {
	otelHook := func(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider) *hook.Hook {
		b.Helper()
		h, err := dlockotel.NewHook(dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp))
		if err != nil {
			b.Fatalf("NewHook() = %v, want nil", err)
		}
		return &h
	}
	for _, bc := range []struct {
		name string
		hook func(b *testing.B) *hook.Hook
	}{
		{"none", func(*testing.B) *hook.Hook { return nil }},
		{"slog-info", func(*testing.B) *hook.Hook {
			h := hook.Slog(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
			return &h
		}},
		{"otel-noop", func(b *testing.B) *hook.Hook {
			return otelHook(b, noop.NewTracerProvider(), metricnoop.NewMeterProvider())
		}},
		{"otel-noop-tracer-sdk-meter", func(b *testing.B) *hook.Hook {
			return otelHook(b, noop.NewTracerProvider(), sdkMeter(b))
		}},
		{"otel-sdk-tracer-sdk-meter", func(b *testing.B) *hook.Hook {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return otelHook(b, tp, sdkMeter(b))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := memlock.New(nil)
			if err != nil {
				b.Fatalf("memlock.New() = %v, want nil", err)
			}
			defer l.Close()
			if h := bc.hook(b); h != nil {
				l.AddHook(*h)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				k, err := l.TryAcquire(ctx, "x")
				if err != nil {
					b.Fatalf("TryAcquire(x) = %v, want nil", err)
				}
				if err := k.Release(ctx); err != nil {
					b.Fatalf("Release = %v, want nil", err)
				}
			}
		})
	}
}
