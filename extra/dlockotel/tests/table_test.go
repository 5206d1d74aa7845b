package dlockotel_test

import (
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/dlock-go/dlock/extra/dlockotel"
)

// instrument is what a tableMeter was asked to create.
type instrument struct {
	kind, unit string
	buckets    []float64
}

// tableMeter records the instruments created with it, and fails the
// creation of the one called fail.
type tableMeter struct {
	noop.Meter
	created map[string]instrument
	fail    string
}

var errRefused = errors.New("refused")

func (m *tableMeter) add(name string, i instrument) error {
	m.created[name] = i
	if name == m.fail {
		return errRefused
	}
	return nil
}

func (m *tableMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := metric.NewInt64CounterConfig(opts...)
	return noop.Int64Counter{}, m.add(name, instrument{kind: "counter", unit: c.Unit()})
}

func (m *tableMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	c := metric.NewInt64UpDownCounterConfig(opts...)
	return noop.Int64UpDownCounter{}, m.add(name, instrument{kind: "updown", unit: c.Unit()})
}

func (m *tableMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c := metric.NewFloat64HistogramConfig(opts...)
	return noop.Float64Histogram{}, m.add(name, instrument{kind: "histogram", unit: c.Unit(), buckets: c.ExplicitBucketBoundaries()})
}

func (m *tableMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	c := metric.NewInt64HistogramConfig(opts...)
	return noop.Int64Histogram{}, m.add(name, instrument{kind: "histogram", unit: c.Unit(), buckets: c.ExplicitBucketBoundaries()})
}

// tableProvider hands out one tableMeter.
type tableProvider struct {
	noop.MeterProvider
	m     *tableMeter
	scope string
}

func (p *tableProvider) Meter(name string, _ ...metric.MeterOption) metric.Meter {
	p.scope = name
	return p.m
}

// TestMetricTable: the hook creates exactly the instruments of the
// metric table in dlock's README, with their units and buckets.
func TestMetricTable(t *testing.T) {
	seconds := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	want := map[string]instrument{
		"dlock.acquire.duration": {"histogram", "s", seconds},
		"dlock.acquire.wait":     {"histogram", "s", seconds},
		"dlock.acquisitions":     {"counter", "{call}", nil},
		"dlock.contentions":      {"counter", "{call}", nil},
		"dlock.reentries":        {"counter", "{call}", nil},
		"dlock.renewals":         {"counter", "{lease}", nil},
		"dlock.renewal.failures": {"counter", "{lease}", nil},
		"dlock.renewal.duration": {"histogram", "s", seconds},
		"dlock.losses":           {"counter", "{lock}", nil},
		"dlock.releases":         {"counter", "{lock}", nil},
		"dlock.hold.duration":    {"histogram", "s", seconds},
		"dlock.held":             {"updown", "{lock}", nil},
		"dlock.waiters":          {"updown", "{call}", nil},
		"dlock.queue.ahead":      {"histogram", "{entry}", []float64{0, 1, 2, 5, 10, 20, 50, 100, 1000}},
	}
	p := &tableProvider{m: &tableMeter{created: map[string]instrument{}}}
	if _, err := dlockotel.NewHook(dlockotel.WithMeterProvider(p)); err != nil {
		t.Fatalf("NewHook() = %v, want nil", err)
	}
	if p.scope != dlockotel.ScopeName {
		t.Errorf("meter scope %q, want %q", p.scope, dlockotel.ScopeName)
	}
	for name, w := range want {
		got, ok := p.m.created[name]
		if !ok {
			t.Errorf("instrument %s not created", name)
			continue
		}
		if got.kind != w.kind || got.unit != w.unit || !slices.Equal(got.buckets, w.buckets) {
			t.Errorf("instrument %s = %v, want %v", name, got, w)
		}
	}
	for name := range p.m.created {
		if _, ok := want[name]; !ok {
			t.Errorf("instrument %s created, want only the table's", name)
		}
	}

	p = &tableProvider{m: &tableMeter{created: map[string]instrument{}, fail: "dlock.held"}}
	if _, err := dlockotel.NewHook(dlockotel.WithMeterProvider(p)); !errors.Is(err, errRefused) {
		t.Errorf("NewHook() with a meter refusing dlock.held = %v, want an error wrapping %v", err, errRefused)
	}
}
