package dlockprometheus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockprometheus"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newLockers returns n Lockers on one memlock Store, each with c's hook,
// closed when the test ends.
func newLockers(t *testing.T, c *dlockprometheus.Collector, n int) []*dlock.Locker {
	t.Helper()
	_, ls := testkit.MemLockers(t, n)
	for _, l := range ls {
		l.AddHook(c.Hook())
	}
	return ls
}

// TestContended follows a handoff on memlock, in a synctest bubble so that
// every duration is exact: A holds "x" for 1s while B waits, then B holds
// it for 0.25s.
func TestContended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := dlockprometheus.New(nil)
		ls := newLockers(t, c, 2)
		a, b := ls[0], ls[1]
		ctx := t.Context()

		ka, err := a.Acquire(ctx, "x")
		if err != nil {
			t.Fatalf("A: Acquire(%q) = %v", "x", err)
		}
		got := make(chan *dlock.Lock)
		go func() {
			kb, err := b.Acquire(ctx, "x")
			if err != nil {
				t.Errorf("B: Acquire(%q) = %v", "x", err)
			}
			got <- kb
		}()
		synctest.Wait() // B found "x" held and waits
		during := collect(t, c, "dlock_waiters", "dlock_held_locks", "dlock_contentions_total")
		want(t, during, `dlock_waiters{backend="memory"}`, 1)
		want(t, during, `dlock_held_locks{backend="memory"}`, 1)
		want(t, during, `dlock_contentions_total{backend="memory"}`, 0) // B's call has not returned

		time.Sleep(time.Second)
		if err := ka.Release(ctx); err != nil {
			t.Fatalf("A: Release = %v", err)
		}
		kb := <-got
		if kb == nil {
			t.FailNow()
		}
		time.Sleep(250 * time.Millisecond)
		if err := kb.Release(ctx); err != nil {
			t.Fatalf("B: Release = %v", err)
		}

		const expected = `
# HELP dlock_acquisitions_total Acquire and TryAcquire calls by outcome: acquired, not_acquired, canceled, error.
# TYPE dlock_acquisitions_total counter
dlock_acquisitions_total{backend="memory",outcome="acquired"} 2
dlock_acquisitions_total{backend="memory",outcome="canceled"} 0
dlock_acquisitions_total{backend="memory",outcome="error"} 0
dlock_acquisitions_total{backend="memory",outcome="not_acquired"} 0
# HELP dlock_contentions_total Acquire and TryAcquire calls that found the name held by another owner.
# TYPE dlock_contentions_total counter
dlock_contentions_total{backend="memory"} 1
# HELP dlock_reentries_total Acquisitions that re-entered a lock their owner held.
# TYPE dlock_reentries_total counter
dlock_reentries_total{backend="memory"} 0
# HELP dlock_releases_total Locks freed on the store, by outcome: released, not_held, error.
# TYPE dlock_releases_total counter
dlock_releases_total{backend="memory",outcome="error"} 0
dlock_releases_total{backend="memory",outcome="not_held"} 0
dlock_releases_total{backend="memory",outcome="released"} 2
# HELP dlock_losses_total Locks lost, by reason: expired, not_held, reported.
# TYPE dlock_losses_total counter
dlock_losses_total{backend="memory",reason="expired"} 0
dlock_losses_total{backend="memory",reason="not_held"} 0
dlock_losses_total{backend="memory",reason="reported"} 0
# HELP dlock_held_locks Locks held now.
# TYPE dlock_held_locks gauge
dlock_held_locks{backend="memory"} 0
# HELP dlock_waiters Acquire calls waiting for a lock now.
# TYPE dlock_waiters gauge
dlock_waiters{backend="memory"} 0
# HELP dlock_acquire_wait_seconds Time waited by acquisitions that found the name held and then got it (handoffs).
# TYPE dlock_acquire_wait_seconds histogram
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.0005"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.001"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.0025"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.005"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.01"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.025"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.05"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.1"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.25"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="0.5"} 0
dlock_acquire_wait_seconds_bucket{backend="memory",le="1"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="2.5"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="5"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="10"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="30"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="60"} 1
dlock_acquire_wait_seconds_bucket{backend="memory",le="+Inf"} 1
dlock_acquire_wait_seconds_sum{backend="memory"} 1
dlock_acquire_wait_seconds_count{backend="memory"} 1
# HELP dlock_hold_duration_seconds How long locks were held, to their release or loss.
# TYPE dlock_hold_duration_seconds histogram
dlock_hold_duration_seconds_bucket{backend="memory",le="0.0005"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.001"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.0025"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.005"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.01"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.025"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.05"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.1"} 0
dlock_hold_duration_seconds_bucket{backend="memory",le="0.25"} 1
dlock_hold_duration_seconds_bucket{backend="memory",le="0.5"} 1
dlock_hold_duration_seconds_bucket{backend="memory",le="1"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="2.5"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="5"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="10"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="30"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="60"} 2
dlock_hold_duration_seconds_bucket{backend="memory",le="+Inf"} 2
dlock_hold_duration_seconds_sum{backend="memory"} 1.25
dlock_hold_duration_seconds_count{backend="memory"} 2
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(expected),
			"dlock_acquisitions_total", "dlock_contentions_total", "dlock_reentries_total", "dlock_releases_total",
			"dlock_losses_total", "dlock_held_locks", "dlock_waiters", "dlock_acquire_wait_seconds",
			"dlock_hold_duration_seconds"); err != nil {
			t.Error(err)
		}
		after := collect(t, c, "dlock_acquire_duration_seconds", "dlock_queue_ahead", "dlock_renewals_total")
		want(t, after, `dlock_acquire_duration_seconds_count{backend="memory",outcome="acquired"}`, 2)
		want(t, after, `dlock_acquire_duration_seconds_sum{backend="memory",outcome="acquired"}`, 1) // A's 0s, B's 1s
		want(t, after, `dlock_acquire_duration_seconds_count{backend="memory",outcome="not_acquired"}`, 0)
		for s := range after {
			if strings.HasPrefix(s, "dlock_queue_ahead") || strings.HasPrefix(s, "dlock_renewals_total") {
				t.Errorf("Got(%s) present, want absent (memlock does not queue; no renewal ran)", s)
			}
		}
	})
}

// TestOutcomes checks the series of the other outcomes: a TryAcquire that
// finds the name held, an Acquire whose context ends, a re-entry, and a
// loss reported as not held after the lease was taken away.
func TestOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := dlockprometheus.New(nil)
		store := memlock.NewStore()
		a, _ := memlock.New(store)
		b, _ := memlock.New(store)
		defer a.Close()
		defer b.Close()
		lost := make(chan struct{})
		a.AddHook(c.Hook())
		a.AddHook(hook.Hook{Lost: func(context.Context, hook.Loss) { close(lost) }}) // after c's
		b.AddHook(c.Hook())
		ctx := t.Context()

		k, err := a.Acquire(ctx, "x")
		if err != nil {
			t.Fatalf("Acquire(%q) = %v", "x", err)
		}
		k2, err := a.Acquire(k.Context(), "x")
		if err != nil {
			t.Fatalf("Acquire(k.Context(), %q) = %v, want a re-entry", "x", err)
		}
		if _, err := b.TryAcquire(ctx, "x"); err == nil {
			t.Fatalf("TryAcquire(%q) = nil, want ErrNotAcquired", "x")
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(short, "x"); err == nil {
			t.Fatalf("Acquire(%q) with a 100ms context = nil, want its deadline", "x")
		}
		store.Expire("x")
		_ = k.Refresh(ctx) // finds the lease gone: lost, not held
		<-lost
		_ = k2.Release(ctx)

		got := collect(t, c)
		want(t, got, `dlock_acquisitions_total{backend="memory",outcome="acquired"}`, 1)
		want(t, got, `dlock_acquisitions_total{backend="memory",outcome="not_acquired"}`, 1)
		want(t, got, `dlock_acquisitions_total{backend="memory",outcome="canceled"}`, 1)
		want(t, got, `dlock_acquisitions_total{backend="memory",outcome="error"}`, 0)
		want(t, got, `dlock_contentions_total{backend="memory"}`, 2)
		want(t, got, `dlock_acquire_wait_seconds_count{backend="memory"}`, 0)
		want(t, got, `dlock_acquire_duration_seconds_sum{backend="memory",outcome="canceled"}`, 0.1)
		want(t, got, `dlock_reentries_total{backend="memory"}`, 1)
		want(t, got, `dlock_losses_total{backend="memory",reason="not_held"}`, 1)
		want(t, got, `dlock_losses_total{backend="memory",reason="expired"}`, 0)
		want(t, got, `dlock_releases_total{backend="memory",outcome="released"}`, 0)
		want(t, got, `dlock_hold_duration_seconds_count{backend="memory"}`, 1)
		want(t, got, `dlock_held_locks{backend="memory"}`, 0)
		want(t, got, `dlock_waiters{backend="memory"}`, 0)
	})
}

// TestNameLabel checks that lock names are no label by default, and that
// NameLabel's value is one on the per-lock metrics, the renewal ones
// excepted.
func TestNameLabel(t *testing.T) {
	acquire := func(t *testing.T, l *dlock.Locker, names ...string) {
		t.Helper()
		for _, name := range names {
			k, err := l.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("TryAcquire(%q) = %v", name, err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("Release(%q) = %v", name, err)
			}
		}
	}
	t.Run("default", func(t *testing.T) {
		c := dlockprometheus.New(nil)
		acquire(t, newLockers(t, c, 1)[0], "jobs/1", "jobs/2")
		got := collect(t, c)
		want(t, got, `dlock_acquisitions_total{backend="memory",outcome="acquired"}`, 2)
		for s := range got {
			if strings.Contains(s, "name=") || strings.Contains(s, "jobs") {
				t.Errorf("Got(%s) present, want no name label", s)
			}
		}
	})
	t.Run("prefix", func(t *testing.T) {
		prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
		c := dlockprometheus.New(&dlockprometheus.Options{NameLabel: prefix})
		l := newLockers(t, c, 1)[0]
		var names []string
		for i := range 100 {
			names = append(names, fmt.Sprintf("p%d/%d", i%3, i))
		}
		acquire(t, l, names...)
		got := collect(t, c)
		want(t, got, `dlock_acquisitions_total{backend="memory",name="p0",outcome="acquired"}`, 34)
		want(t, got, `dlock_acquisitions_total{backend="memory",name="p1",outcome="acquired"}`, 33)
		want(t, got, `dlock_acquisitions_total{backend="memory",name="p2",outcome="acquired"}`, 33)
		want(t, got, `dlock_held_locks{backend="memory",name="p1"}`, 0)
		want(t, got, `dlock_hold_duration_seconds_count{backend="memory",name="p2"}`, 33)
		// One series per prefix and outcome: 3 x 4, not 100 x 4.
		if n := testutil.CollectAndCount(c, "dlock_acquisitions_total"); n != 12 {
			t.Errorf("CollectAndCount(dlock_acquisitions_total) = %d, want 12", n)
		}
		if n := testutil.CollectAndCount(c, "dlock_releases_total"); n != 9 {
			t.Errorf("CollectAndCount(dlock_releases_total) = %d, want 9", n)
		}
	})
	t.Run("renewals", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := dlockprometheus.New(&dlockprometheus.Options{NameLabel: func(string) string { return "all" }})
			l := newLockers(t, c, 1)[0]
			k, err := l.Acquire(t.Context(), "x", dlock.WithTTL(3*time.Second))
			if err != nil {
				t.Fatalf("Acquire(%q) = %v", "x", err)
			}
			time.Sleep(5 * time.Second) // at least one renewal
			synctest.Wait()
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("Release = %v", err)
			}
			got := collect(t, c, "dlock_renewals_total", "dlock_renewal_failures_total", "dlock_held_locks")
			want(t, got, `dlock_renewal_failures_total{backend="memory"}`, 0)
			want(t, got, `dlock_renewals_total{backend="memory",outcome="not_held"}`, 0)
			want(t, got, `dlock_held_locks{backend="memory",name="all"}`, 0)
			if got[`dlock_renewals_total{backend="memory",outcome="renewed"}`] < 1 {
				t.Errorf("Got(dlock_renewals_total{outcome=renewed}) = %v, want >= 1 (without a name label)", got)
			}
		})
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		c := dlockprometheus.New(&dlockprometheus.Options{NameLabel: func(name string) string { return name[:1] }})
		acquire(t, newLockers(t, c, 1)[0], "é")
		want(t, collect(t, c), `dlock_acquisitions_total{backend="memory",name="`+"\uFFFD"+`",outcome="acquired"}`, 1)
	})
}

// TestOptions checks the Namespace and ConstLabels, and that invalid
// Options fail the registration rather than panic in a hook.
func TestOptions(t *testing.T) {
	buckets := []float64{1, 2}
	c := dlockprometheus.New(&dlockprometheus.Options{Namespace: "app", ConstLabels: prometheus.Labels{"pool": "a"},
		Buckets: buckets})
	buckets[0] = 5 // New keeps a copy
	if err := prometheus.NewRegistry().Register(c); err != nil {
		t.Fatalf("Register = %v, want nil", err)
	}
	l := newLockers(t, c, 1)[0]
	k, err := l.TryAcquire(t.Context(), "x")
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	_ = k.Release(t.Context())
	got := collect(t, c)
	want(t, got, `app_dlock_acquisitions_total{backend="memory",outcome="acquired",pool="a"}`, 1)
	want(t, got, `app_dlock_hold_duration_seconds_bucket{backend="memory",pool="a",le="1"}`, 1)
	want(t, got, `app_dlock_hold_duration_seconds_bucket{backend="memory",pool="a",le="2"}`, 1)
	if n := testutil.CollectAndCount(c, "app_dlock_hold_duration_seconds"); n != 1 {
		t.Errorf("CollectAndCount(app_dlock_hold_duration_seconds) = %d, want 1", n)
	}

	for _, o := range []dlockprometheus.Options{
		{Buckets: []float64{1, 0.5}},
		{QueueBuckets: []float64{0, 0}},
		{ConstLabels: prometheus.Labels{"le": "1"}},
		{ConstLabels: prometheus.Labels{"backend": "x"}},
		{ConstLabels: prometheus.Labels{"name": "x"}, NameLabel: strings.ToUpper},
		{ConstLabels: prometheus.Labels{"": "x"}},
		{ConstLabels: prometheus.Labels{"pool": "\xff"}},
		{Namespace: "\xff"},
	} {
		c := dlockprometheus.New(&o)
		if err := prometheus.NewRegistry().Register(c); err == nil {
			t.Errorf("Register(New(%+v)) = nil, want an error", o)
		}
		l := newLockers(t, c, 1)[0]
		k, err := l.TryAcquire(t.Context(), "x") // must not panic
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
		_ = k.Release(t.Context())
	}
}
