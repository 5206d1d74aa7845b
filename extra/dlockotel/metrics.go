package dlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// secondsBuckets are the boundaries of the duration histograms, in
// seconds; queueBuckets those of dlock.queue.ahead, in entries.
var (
	secondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	queueBuckets   = []float64{0, 1, 2, 5, 10, 20, 50, 100, 1000}
)

// instruments are the hook's metrics, as dlock's README lists them.
type instruments struct {
	acquireDuration metric.Float64Histogram
	acquireWait     metric.Float64Histogram
	acquisitions    metric.Int64Counter
	contentions     metric.Int64Counter
	reentries       metric.Int64Counter
	renewals        metric.Int64Counter
	renewalFailures metric.Int64Counter
	renewalDuration metric.Float64Histogram
	losses          metric.Int64Counter
	releases        metric.Int64Counter
	holdDuration    metric.Float64Histogram
	held            metric.Int64UpDownCounter
	waiters         metric.Int64UpDownCounter
	queueAhead      metric.Int64Histogram
}

// newInstruments creates the hook's instruments with m.
func newInstruments(m metric.Meter) (*instruments, error) {
	var errs []error
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondsBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	i := &instruments{
		acquireDuration: seconds("dlock.acquire.duration", "Time an Acquire or TryAcquire call took, by outcome."),
		acquireWait:     seconds("dlock.acquire.wait", "Time waited by acquisitions that found the name held and then got it (handoffs)."),
		acquisitions:    counter("dlock.acquisitions", "{call}", "Acquire and TryAcquire calls, by outcome."),
		contentions:     counter("dlock.contentions", "{call}", "Acquire and TryAcquire calls that found the name held by another owner."),
		reentries:       counter("dlock.reentries", "{call}", "Acquisitions that re-entered a held lock."),
		renewals:        counter("dlock.renewals", "{lease}", "Leases in automatic renewal batches, by outcome."),
		renewalFailures: counter("dlock.renewal.failures", "{lease}", "Leases whose automatic renewal did not succeed."),
		renewalDuration: seconds("dlock.renewal.duration", "Latency of one renewal batch's store call."),
		losses:          counter("dlock.losses", "{lock}", "Locks lost, by reason."),
		releases:        counter("dlock.releases", "{lock}", "Locks freed on the store, by outcome."),
		holdDuration:    seconds("dlock.hold.duration", "How long locks were held, to their release or loss."),
		held:            upDown("dlock.held", "{lock}", "Locks held now."),
		waiters:         upDown("dlock.waiters", "{call}", "Acquire calls waiting now."),
	}
	var err error
	i.queueAhead, err = m.Int64Histogram("dlock.queue.ahead", metric.WithUnit("{entry}"),
		metric.WithDescription("Entries queued ahead when an acquisition joined the store's queue."),
		metric.WithExplicitBucketBoundaries(queueBuckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return i, nil
}
