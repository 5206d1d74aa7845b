package dlockotel_test

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock/extra/dlockotel"
	"github.com/dlock-go/dlock/memlock"
)

// Example wires the hook to a Locker. Spans go to the global tracer
// provider; the metrics here go to a manual reader, to print them (a
// service would pass its exporting MeterProvider, or none for the global
// one). Lock names appear as their part before the first '/'.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	hook, err := dlockotel.NewHook(
		dlockotel.WithMeterProvider(mp),
		dlockotel.WithLockName(func(name string) string {
			prefix, _, _ := strings.Cut(name, "/")
			return prefix
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, _ := memlock.New(nil)
	defer locker.Close()
	locker.AddHook(hook)

	lock, err := locker.Acquire(ctx, "reports/nightly")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lock.Release(ctx)

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range s.DataPoints {
				fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
			}
		}
	}
	// Output:
	// dlock.acquisitions backend=memory,name=reports,outcome=acquired 1
	// dlock.releases backend=memory,name=reports,outcome=released 1
	// dlock.held backend=memory,name=reports 0
	// dlock.waiters backend=memory,name=reports 0
}
