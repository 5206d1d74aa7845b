package dlockprometheus_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockprometheus"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newRedisLocker returns a Locker on srv with c's hook, closed when the
// test ends.
func newRedisLocker(t *testing.T, srv *testserver.Redis, c *dlockprometheus.Collector) *dlock.Locker {
	t.Helper()
	l, err := redislock.New(srv.Client(t), nil)
	if err != nil {
		t.Fatalf("redislock.New = %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	l.AddHook(c.Hook())
	return l
}

// TestRedisLoss loses a lock by pausing the Redis server past its TTL.
func TestRedisLoss(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := dlockprometheus.New(nil)
	l := newRedisLocker(t, srv, c)
	lost := make(chan struct{})
	l.AddHook(hook.Hook{Lost: func(context.Context, hook.Loss) { close(lost) }}) // runs after c's

	k, err := l.Acquire(t.Context(), "x", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", "x", err)
	}
	held := collect(t, c, "dlock_held_locks")
	want(t, held, `dlock_held_locks{backend="redis"}`, 1)

	srv.Pause(t)
	defer srv.Resume(t)
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatalf("lock not lost 30s after pausing Redis with a 1s TTL")
	}
	select {
	case <-k.Done():
	default:
		t.Errorf("Lost hook called before Done closed")
	}
	srv.Resume(t)

	const expected = `
# HELP dlock_losses_total Locks lost, by reason: expired, not_held, reported.
# TYPE dlock_losses_total counter
dlock_losses_total{backend="redis",reason="expired"} 1
dlock_losses_total{backend="redis",reason="not_held"} 0
dlock_losses_total{backend="redis",reason="reported"} 0
# HELP dlock_held_locks Locks held now.
# TYPE dlock_held_locks gauge
dlock_held_locks{backend="redis"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), "dlock_losses_total", "dlock_held_locks"); err != nil {
		t.Error(err)
	}
	got := collect(t, c)
	want(t, got, `dlock_hold_duration_seconds_count{backend="redis"}`, 1)
	want(t, got, `dlock_releases_total{backend="redis",outcome="released"}`, 0)
	if h := got[`dlock_hold_duration_seconds_sum{backend="redis"}`]; h <= 0 {
		t.Errorf("Got(dlock_hold_duration_seconds_sum) = %v, want > 0", h)
	}
}

// TestScrape scrapes a promhttp handler while 7 Lockers wait for a name
// that an eighth holds, and after the eight have taken it 160 times.
func TestScrape(t *testing.T) {
	const workers, rounds = 8, 20
	srv := testserver.StartRedis(t)
	c := dlockprometheus.New(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer hs.Close()
	scrape := func() []byte {
		t.Helper()
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %s, %v:\n%s", resp.Status, err, body)
		}
		return body
	}

	ctx := t.Context()
	ls := make([]*dlock.Locker, workers)
	for i := range ls {
		ls[i] = newRedisLocker(t, srv, c)
	}
	work := func(l *dlock.Locker, n int) {
		for range n {
			k, err := l.Acquire(ctx, "x")
			if err != nil {
				t.Errorf("Acquire(%q) = %v", "x", err)
				return
			}
			time.Sleep(time.Millisecond)
			if err := k.Release(ctx); err != nil {
				t.Errorf("Release(%q) = %v", "x", err)
				return
			}
		}
	}

	// Worker 0 takes "x" first and holds it until the other seven are
	// queued for it on the server: each of them is then contended.
	first, err := ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", "x", err)
	}
	var wg sync.WaitGroup
	for _, l := range ls[1:] {
		wg.Go(func() { work(l, rounds) })
	}
	// Locker.Waiters reads the server's queue.
	queued := func() int {
		n, err := ls[0].Waiters(ctx, "x")
		if err != nil {
			t.Fatalf("Waiters(%q) = %v", "x", err)
		}
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n := queued()
		if n == workers-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queued for %q a minute after starting %d workers, want %d", n, "x", workers-1, workers-1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	body := scrape()
	t.Logf("scrape while %d Lockers wait for a name an eighth holds:\n%s", workers-1,
		dlockLines(body, "dlock_waiters", "dlock_held_locks", "dlock_acquisitions_total"))
	during := samples(t, body)
	want(t, during, `dlock_waiters{backend="redis"}`, workers-1)
	want(t, during, `dlock_held_locks{backend="redis"}`, 1)
	want(t, during, `dlock_acquisitions_total{backend="redis",outcome="acquired"}`, 1)
	wg.Go(func() {
		if err := first.Release(ctx); err != nil {
			t.Errorf("Release(%q) = %v", "x", err)
		}
		work(ls[0], rounds-1)
	})
	wg.Wait()

	body = scrape()
	t.Logf("scrape after %d workers x %d acquisitions of one name on Redis:\n%s", workers, rounds, dlockLines(body))
	got := samples(t, body)
	const total = workers * rounds
	want(t, got, `dlock_acquisitions_total{backend="redis",outcome="acquired"}`, total)
	want(t, got, `dlock_acquisitions_total{backend="redis",outcome="error"}`, 0)
	want(t, got, `dlock_acquire_duration_seconds_count{backend="redis",outcome="acquired"}`, total)
	want(t, got, `dlock_releases_total{backend="redis",outcome="released"}`, total)
	want(t, got, `dlock_hold_duration_seconds_count{backend="redis"}`, total)
	want(t, got, `dlock_losses_total{backend="redis",reason="expired"}`, 0)
	want(t, got, `dlock_held_locks{backend="redis"}`, 0)
	want(t, got, `dlock_waiters{backend="redis"}`, 0)

	// The seven queued behind worker 0 are contended, and every contended
	// call was an Acquire that got the lock: a handoff (redislock reports
	// driver.Result.Waited and Ahead).
	contentions := got[`dlock_contentions_total{backend="redis"}`]
	if contentions < workers-1 || contentions >= total {
		t.Errorf("Got(dlock_contentions_total) = %v, want in [%d, %d)", contentions, workers-1, total)
	}
	want(t, got, `dlock_acquire_wait_seconds_count{backend="redis"}`, contentions)
	if n := got[`dlock_queue_ahead_count{backend="redis"}`]; n < workers-1 {
		t.Errorf("Got(dlock_queue_ahead_count) = %v, want >= %d (the queued ones)", n, workers-1)
	}
	if ahead := got[`dlock_queue_ahead_sum{backend="redis"}`]; ahead < 1 {
		t.Errorf("Got(dlock_queue_ahead_sum) = %v, want >= 1: a worker joined the queue behind another", ahead)
	}
}
