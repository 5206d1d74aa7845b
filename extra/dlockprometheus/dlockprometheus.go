// Package dlockprometheus exports the work of dlock Lockers as Prometheus
// metrics: a Collector to register, and the hook.Hook that feeds it.
//
//	c := dlockprometheus.New(nil)
//	prometheus.MustRegister(c)
//	locker.AddHook(c.Hook())
//
// One Collector may serve several Lockers: the backend label
// (dlock.Locker.Backend) tells their stores apart. Add its hook before a
// Locker's first acquisition, so that dlock_held_locks sees every lock it
// later sees released or lost.
//
// The metrics, with the labels they carry besides Options.ConstLabels:
//
//	dlock_acquire_duration_seconds  histogram  backend, outcome  time an Acquire or TryAcquire call took
//	dlock_acquire_wait_seconds      histogram  backend           time waited by acquisitions that found the name held and got it (handoffs)
//	dlock_acquisitions_total        counter    backend, outcome  calls by outcome: acquired, not_acquired, canceled, error
//	dlock_contentions_total         counter    backend           calls that found the name held by another owner
//	dlock_reentries_total           counter    backend           acquisitions that re-entered a held lock
//	dlock_renewals_total            counter    backend, outcome  leases in renewal batches by outcome: renewed, not_held, failed
//	dlock_renewal_failures_total    counter    backend           leases whose renewal did not succeed
//	dlock_renewal_duration_seconds  histogram  backend           latency of one renewal batch's store call
//	dlock_losses_total              counter    backend, reason   locks lost, by reason: expired, not_held, reported
//	dlock_releases_total            counter    backend, outcome  locks freed on the store, by outcome: released, not_held, error
//	dlock_hold_duration_seconds     histogram  backend           how long locks were held, to their release or loss
//	dlock_held_locks                gauge      backend           locks held now
//	dlock_waiters                   gauge      backend           Acquire calls waiting now
//	dlock_queue_ahead               histogram  backend           entries queued ahead when an acquisition joined the store's queue
//
// Lock names are not labels by default: their number is unbounded. With
// Options.NameLabel set, every metric but the three renewal ones (a
// renewal batch mixes names) also carries a "name" label with the value
// NameLabel maps the lock's name to, for example its prefix.
//
// A backend's series, and for a name label value its own, appear at the
// first event that concerns them, every outcome and reason of them at
// once, at zero until it happens, so that rate and increase see the
// first occurrence. dlock_queue_ahead is the exception: it appears only
// for the stores that queue waiters (Redis, ZooKeeper, etcd).
package dlockprometheus

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBuckets are the upper bounds, in seconds, of the duration
// histograms' buckets when Options.Buckets is empty.
var DefaultBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// DefaultQueueBuckets are the upper bounds of dlock_queue_ahead's buckets
// when Options.QueueBuckets is empty.
var DefaultQueueBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 1000}

// Options configures a Collector. A nil *Options means defaults.
type Options struct {
	// Namespace, when set, is prepended with an underscore to every
	// metric's name: "myapp" gives myapp_dlock_acquisitions_total.
	// Default: "" (the names above).
	Namespace string

	// ConstLabels are added to every metric, for example to tell
	// Collectors apart in one registry. They must not use the metrics'
	// own label names: backend, outcome, reason, name (with NameLabel) and
	// le. Default: none.
	ConstLabels prometheus.Labels

	// NameLabel, when set, maps a lock's name to the value of a "name"
	// label on every metric but the renewal ones. Keep the number of
	// values it returns small: each is a set of series of its own.
	// Invalid UTF-8 in its result is replaced. Default: nil (no name
	// label).
	NameLabel func(name string) string

	// Buckets are the upper bounds, in seconds, of the buckets of the
	// duration histograms; they must increase. Default: DefaultBuckets.
	Buckets []float64

	// QueueBuckets are the upper bounds of dlock_queue_ahead's buckets;
	// they must increase. Default: DefaultQueueBuckets.
	QueueBuckets []float64
}

// Collector holds a set of dlock metrics. It implements
// prometheus.Collector; its Hook feeds it. It is safe for concurrent use.
type Collector struct {
	err       error // invalid Options; Describe reports it and Hook records nothing
	nameLabel func(string) string

	// Per-lock metrics; their labels end with "name" when nameLabel is set.
	acquireDuration *prometheus.HistogramVec // backend, outcome
	acquireWait     *prometheus.HistogramVec // backend
	acquisitions    *prometheus.CounterVec   // backend, outcome
	contentions     *prometheus.CounterVec   // backend
	reentries       *prometheus.CounterVec   // backend
	losses          *prometheus.CounterVec   // backend, reason
	releases        *prometheus.CounterVec   // backend, outcome
	holdDuration    *prometheus.HistogramVec // backend
	held            *prometheus.GaugeVec     // backend
	waiters         *prometheus.GaugeVec     // backend
	queueAhead      *prometheus.HistogramVec // backend

	// Renewal metrics, by backend only.
	renewals        *prometheus.CounterVec   // backend, outcome
	renewalFailures *prometheus.CounterVec   // backend
	renewalDuration *prometheus.HistogramVec // backend

	locks    sync.Map // seriesKey -> *lockSeries
	backends sync.Map // backend -> *renewalSeries
}

// New returns a Collector configured by opts (nil means defaults). Invalid
// Options (buckets that do not increase, a bad Namespace or ConstLabels)
// make the Collector's registration fail with an error saying why, and
// its Hook record nothing.
func New(opts *Options) *Collector {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Buckets) == 0 {
		o.Buckets = DefaultBuckets
	}
	if len(o.QueueBuckets) == 0 {
		o.QueueBuckets = DefaultQueueBuckets
	}
	// The histograms keep the slices they are given: later changes to the
	// caller's (or to the defaults) must not reach them.
	o.Buckets, o.QueueBuckets = slices.Clone(o.Buckets), slices.Clone(o.QueueBuckets)
	c := &Collector{nameLabel: o.NameLabel}
	lock := func(labels ...string) []string {
		if o.NameLabel != nil {
			labels = append(labels, "name")
		}
		return labels
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: o.Namespace, Subsystem: "dlock",
			Name: name, Help: help, ConstLabels: o.ConstLabels}, labels)
	}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: o.Namespace, Subsystem: "dlock",
			Name: name, Help: help, ConstLabels: o.ConstLabels}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "dlock",
			Name: name, Help: help, ConstLabels: o.ConstLabels, Buckets: buckets}, labels)
	}
	c.acquireDuration = histogram("acquire_duration_seconds",
		"Time an Acquire or TryAcquire call took, by outcome.", o.Buckets, lock("backend", "outcome"))
	c.acquireWait = histogram("acquire_wait_seconds",
		"Time waited by acquisitions that found the name held and then got it (handoffs).", o.Buckets, lock("backend"))
	c.acquisitions = counter("acquisitions_total",
		"Acquire and TryAcquire calls by outcome: acquired, not_acquired, canceled, error.", lock("backend", "outcome"))
	c.contentions = counter("contentions_total",
		"Acquire and TryAcquire calls that found the name held by another owner.", lock("backend"))
	c.reentries = counter("reentries_total",
		"Acquisitions that re-entered a lock their owner held.", lock("backend"))
	c.losses = counter("losses_total",
		"Locks lost, by reason: expired, not_held, reported.", lock("backend", "reason"))
	c.releases = counter("releases_total",
		"Locks freed on the store, by outcome: released, not_held, error.", lock("backend", "outcome"))
	c.holdDuration = histogram("hold_duration_seconds",
		"How long locks were held, to their release or loss.", o.Buckets, lock("backend"))
	c.held = gauge("held_locks", "Locks held now.", lock("backend"))
	c.waiters = gauge("waiters", "Acquire calls waiting for a lock now.", lock("backend"))
	c.queueAhead = histogram("queue_ahead",
		"Entries queued ahead when an acquisition joined the store's queue.", o.QueueBuckets, lock("backend"))
	c.renewals = counter("renewals_total",
		"Leases in automatic renewal batches, by outcome: renewed, not_held, failed.", []string{"backend", "outcome"})
	c.renewalFailures = counter("renewal_failures_total",
		"Leases whose automatic renewal did not succeed.", []string{"backend"})
	c.renewalDuration = histogram("renewal_duration_seconds",
		"Latency of one automatic renewal batch's store call.", o.Buckets, []string{"backend"})
	c.err = c.check(o)
	return c
}

// check returns why o cannot make valid metrics, or nil.
func (c *Collector) check(o Options) error {
	for _, bs := range []struct {
		field string
		v     []float64
	}{{"Buckets", o.Buckets}, {"QueueBuckets", o.QueueBuckets}} {
		for i, b := range bs.v {
			if math.IsNaN(b) || i > 0 && b <= bs.v[i-1] {
				return fmt.Errorf("dlockprometheus: %s %v do not increase", bs.field, bs.v)
			}
		}
	}
	if _, ok := o.ConstLabels["le"]; ok {
		return errors.New(`dlockprometheus: ConstLabels has "le", which histograms use`)
	}
	ch := make(chan *prometheus.Desc, len(c.collectors())) // one Desc each
	c.describe(ch)
	close(ch)
	var err error
	for d := range ch {
		if e := d.Err(); e != nil && err == nil {
			err = fmt.Errorf("dlockprometheus: %w", e)
		}
	}
	return err
}

// collectors returns the metric vectors, in the order they are described.
func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.acquireDuration, c.acquireWait, c.acquisitions, c.contentions, c.reentries,
		c.renewals, c.renewalFailures, c.renewalDuration, c.losses, c.releases, c.holdDuration, c.held,
		c.waiters, c.queueAhead}
}

// Describe implements prometheus.Collector. For a Collector made with
// invalid Options, it sends one invalid Desc that makes registration fail.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.err != nil {
		ch <- prometheus.NewInvalidDesc(c.err)
		return
	}
	c.describe(ch)
}

func (c *Collector) describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		return
	}
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// nameValue returns the name label's value for a lock name.
func (c *Collector) nameValue(name string) string {
	return strings.ToValidUTF8(c.nameLabel(name), "\uFFFD")
}
