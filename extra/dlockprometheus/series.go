package dlockprometheus

import (
	"github.com/dlock-go/dlock/hook"
	"github.com/prometheus/client_golang/prometheus"
)

// lockSeries holds the series of the per-lock metrics for one backend and
// name label value, resolved once so that an event costs a map lookup
// and atomic additions rather than a label hash per metric.
type lockSeries struct {
	labels          []string                                    // backend, and the name label's value if any
	acquireDuration [hook.AcquireFailed + 1]prometheus.Observer // by hook.AcquireOutcome
	acquisitions    [hook.AcquireFailed + 1]prometheus.Counter  // by hook.AcquireOutcome
	losses          [hook.LossReported + 1]prometheus.Counter   // by hook.LossReason
	releases        [hook.ReleaseFailed + 1]prometheus.Counter  // by hook.ReleaseOutcome
	acquireWait     prometheus.Observer
	contentions     prometheus.Counter
	reentries       prometheus.Counter
	holdDuration    prometheus.Observer
	held            prometheus.Gauge
	waiters         prometheus.Gauge
}

// seriesKey identifies a lockSeries.
type seriesKey struct {
	backend, name string // name: the name label's value, "" without one
}

// lock returns the series of the lock name on backend, making them (at
// zero) on the first event for their labels.
func (c *Collector) lock(backend, name string) *lockSeries {
	k := seriesKey{backend: backend}
	if c.nameLabel != nil {
		k.name = c.nameValue(name)
	}
	if s, ok := c.locks.Load(k); ok {
		return s.(*lockSeries)
	}
	s := &lockSeries{labels: []string{backend}}
	if c.nameLabel != nil {
		s.labels = append(s.labels, k.name)
	}
	// with returns the label values of s followed by v, where a variable
	// label (outcome, reason) comes before the name label.
	with := func(v string) []string {
		return append([]string{backend, v}, s.labels[1:]...)
	}
	for o := range s.acquisitions {
		v := hook.AcquireOutcome(o).String()
		s.acquireDuration[o] = c.acquireDuration.WithLabelValues(with(v)...)
		s.acquisitions[o] = c.acquisitions.WithLabelValues(with(v)...)
	}
	for r := range s.losses {
		s.losses[r] = c.losses.WithLabelValues(with(hook.LossReason(r).String())...)
	}
	for o := range s.releases {
		s.releases[o] = c.releases.WithLabelValues(with(hook.ReleaseOutcome(o).String())...)
	}
	s.acquireWait = c.acquireWait.WithLabelValues(s.labels...)
	s.contentions = c.contentions.WithLabelValues(s.labels...)
	s.reentries = c.reentries.WithLabelValues(s.labels...)
	s.holdDuration = c.holdDuration.WithLabelValues(s.labels...)
	s.held = c.held.WithLabelValues(s.labels...)
	s.waiters = c.waiters.WithLabelValues(s.labels...)
	got, _ := c.locks.LoadOrStore(k, s) // a concurrent maker's series are the same ones
	return got.(*lockSeries)
}

// renewalSeries holds the series of the renewal metrics for one backend.
type renewalSeries struct {
	leases   [3]prometheus.Counter // renewed, not_held, failed
	failures prometheus.Counter
	duration prometheus.Observer
}

// renewal returns the renewal series of backend, making them (at zero) on
// its first renewal batch.
func (c *Collector) renewal(backend string) *renewalSeries {
	if s, ok := c.backends.Load(backend); ok {
		return s.(*renewalSeries)
	}
	s := &renewalSeries{
		failures: c.renewalFailures.WithLabelValues(backend),
		duration: c.renewalDuration.WithLabelValues(backend),
	}
	for i, o := range [...]string{"renewed", "not_held", "failed"} {
		s.leases[i] = c.renewals.WithLabelValues(backend, o)
	}
	got, _ := c.backends.LoadOrStore(backend, s)
	return got.(*renewalSeries)
}
