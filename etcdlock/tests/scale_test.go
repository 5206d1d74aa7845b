package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The adversary is a long queue: a waiter that, once woken, reads the
// keys ahead of it with a range sorted or filtered by create revision
// (as etcd's own concurrency.Mutex does) makes etcd fetch every key
// under the name, since etcd's applier drops the limit of such a read,
// so each handoff costs the server the queue's length. For each mode, n
// waiters on a Locker whose client counts the keys etcd fetches for its
// reads queue behind a holder; once each of them waits, the holder
// releases, and each waiter releases as soon as it holds. The keys
// fetched while the lock goes down the queue are at most 2 per waiter
// (the read of its own key before it holds; nothing for the queue's
// events), with 1 waiter as with 100.
func TestHandoffReadsDoNotGrowWithQueue(t *testing.T) {
	e := testserver.StartEtcd(t)
	modes := []struct {
		what    string
		holders int                        // acquisitions of the holder
		opts    func(i int) []dlock.Option // the i-th waiter's (and, i = -1, the holder's)
	}{
		{"exclusive", 1, func(int) []dlock.Option { return nil }},
		{"shared behind exclusive", 1, func(i int) []dlock.Option {
			if i >= 0 && i%2 == 0 {
				return []dlock.Option{dlock.Shared()}
			}
			return nil
		}},
		{"permits", 2, func(int) []dlock.Option { return []dlock.Option{dlock.WithLimit(2)} }},
	}
	for _, m := range modes {
		for _, n := range []int{1, 100} {
			t.Run(fmt.Sprintf("%s/%d", m.what, n), func(t *testing.T) {
				c := &fetchCounter{}
				holder, waiters := newLocker(t, e.Client(t), nil), newLocker(t, c.client(t, e), nil)
				name := "scale/" + t.Name()
				var held []*dlock.Lock
				for range m.holders {
					held = append(held, testkit.MustTryAcquire(t, holder, name, m.opts(-1)...))
				}
				base := testhook.Waiting()
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						k, err := waiters.Acquire(t.Context(), name, m.opts(i)...)
						if err != nil {
							t.Errorf("waiter %d: Acquire(%q) = %v", i, name, err)
							return
						}
						if err := k.Release(t.Context()); err != nil {
							t.Errorf("waiter %d: Release = %v", i, err)
						}
					})
				}
				if !testkit.Poll(testkit.Patience, func() bool { return testhook.Waiting()-base == int64(n) }) {
					t.Fatalf("after %v: %d waits set, want %d", testkit.Patience, testhook.Waiting()-base, n)
				}
				c.reset()
				for _, k := range held {
					testkit.MustRelease(t, k)
				}
				wg.Wait()
				keys, reqs := c.keys.Load(), c.requests.Load()
				t.Logf("%d waiters: %d keys fetched, %d KV requests for the handoffs (%.2f, %.2f per waiter)",
					n, keys, reqs, float64(keys)/float64(n), float64(reqs)/float64(n))
				if keys > int64(2*n) {
					t.Errorf("the lock going down %d waiters made etcd fetch %d keys for their reads, want at most %d", n, keys, 2*n)
				}
			})
		}
	}
}

// fetchCounter counts a client's KV requests and the keys etcd fetches
// from its backend to serve their reads.
type fetchCounter struct {
	keys, requests atomic.Int64
	by             sessionlocktest.RequestCounter // requests by kind
}

func (c *fetchCounter) reset() { c.keys.Store(0); c.requests.Store(0); c.by.Take() }

// kind names a KV request for the breakdown: its method, and for a
// transaction the kinds of its operations and whether it succeeded.
func kind(req, reply any) string {
	t, ok := req.(*etcdserverpb.TxnRequest)
	if !ok {
		return fmt.Sprintf("%T", req)
	}
	var ops []string
	for _, op := range t.Success {
		ops = append(ops, fmt.Sprintf("%T", op.Request))
	}
	return fmt.Sprintf("txn%v:%v", ops, reply.(*etcdserverpb.TxnResponse).Succeeded)
}

// client returns a client of e whose KV requests c counts.
func (c *fetchCounter) client(t testing.TB, e *testserver.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Addr()},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.intercept)},
	})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func (c *fetchCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoke(ctx, method, req, reply, cc, opts...)
	if err != nil || !strings.HasPrefix(method, "/etcdserverpb.KV/") {
		return err
	}
	c.requests.Add(1)
	c.by.Add(kind(req, reply))
	switch r := req.(type) {
	case *etcdserverpb.RangeRequest:
		c.keys.Add(fetched(r, reply.(*etcdserverpb.RangeResponse)))
	case *etcdserverpb.TxnRequest:
		resp := reply.(*etcdserverpb.TxnResponse)
		ops := r.Success
		if !resp.Succeeded {
			ops = r.Failure
		}
		for i, op := range ops {
			if rr := op.GetRequestRange(); rr != nil && i < len(resp.Responses) {
				c.keys.Add(fetched(rr, resp.Responses[i].GetResponseRange()))
			}
		}
	}
	return nil
}

// fetched returns how many keys etcd 3.4's applier (applierV3backend.Range)
// reads from its backend to serve r, whose reply is resp: none for a
// count; every key in the range for a read sorted (but by key, ascending,
// which the client sends as unsorted) or filtered by revision, whose
// limit it drops; else up to the limit, plus one to tell whether there
// are more.
func fetched(r *etcdserverpb.RangeRequest, resp *etcdserverpb.RangeResponse) int64 {
	switch {
	case r.CountOnly:
		return 0
	case r.SortOrder != etcdserverpb.RangeRequest_NONE,
		r.MinCreateRevision != 0, r.MaxCreateRevision != 0, r.MinModRevision != 0, r.MaxModRevision != 0:
		return resp.GetCount()
	case r.Limit > 0:
		return min(r.Limit+1, resp.GetCount())
	}
	return resp.GetCount()
}

// BenchmarkHandoff runs the bench's waiters chart within one process: n
// waiters and a holder on one name, over 4 Lockers on clients of their
// own, each acquiring again as soon as it released. It reports the p50
// of the time from a release to the next holder's Acquire returning,
// and the keys etcd fetched for reads and the KV requests sent per
// acquisition.
func BenchmarkHandoff(b *testing.B) {
	e := testserver.StartEtcd(b)
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchmarkHandoff(b, e, n) })
	}
}

func benchmarkHandoff(b *testing.B, e *testserver.Etcd, n int) {
	c := &fetchCounter{}
	var lockers []*dlock.Locker
	for range 4 {
		lockers = append(lockers, newLocker(b, c.client(b, e), nil))
	}
	name := "bench/" + b.Name()
	h := &handoffs{target: -1}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	// The figures are taken when the target is reached, before the
	// waiters give up.
	var (
		once       sync.Once
		keys, reqs int64
		by         map[string]int
		cpu        float64
		cpuErr     error
	)
	done := func() {
		once.Do(func() {
			keys, reqs = c.keys.Load(), c.requests.Load()
			cpu, cpuErr = serverCPU(e)
			_, by = c.by.Take()
			cancel()
		})
	}
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Go(func() { h.loop(ctx, lockers[i%4], name, done) })
	}
	testkit.Poll(time.Minute, func() bool { return testhook.Waiting() >= int64(n) })
	b.ResetTimer()
	cpu0, err := serverCPU(e)
	if err != nil {
		b.Fatal(err)
	}
	c.reset()
	h.start(b.N)
	wg.Wait()
	b.StopTimer()
	if cpuErr != nil {
		b.Fatal(cpuErr)
	}
	b.ReportMetric((cpu-cpu0)*1e6/float64(b.N), "µs-server-cpu/acq")
	slices.Sort(h.d)
	if len(h.d) > 0 {
		b.ReportMetric(float64(h.d[len(h.d)/2].Microseconds()), "µs-handoff-p50")
	}
	b.ReportMetric(float64(keys)/float64(b.N), "keys/acq")
	b.ReportMetric(float64(reqs)/float64(b.N), "requests/acq")
	b.Logf("requests by kind: %v", by)
}

// handoffs records the handoffs of a benchmark's loops once started.
type handoffs struct {
	mu     sync.Mutex
	target int             // acquisitions to record; -1 before start
	rel    time.Time       // when the last holder called Release
	d      []time.Duration // recorded handoffs
}

func (h *handoffs) start(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.target, h.rel = n, time.Time{}
}

// loop acquires and releases name on l until ctx ends, recording each
// handoff, and calls done once the target is reached.
func (h *handoffs) loop(ctx context.Context, l *dlock.Locker, name string, done func()) {
	for ctx.Err() == nil {
		k, err := l.Acquire(ctx, name)
		if err != nil {
			return
		}
		now := time.Now()
		h.mu.Lock()
		if h.target >= 0 && !h.rel.IsZero() {
			h.d = append(h.d, now.Sub(h.rel))
			if len(h.d) >= h.target {
				done()
			}
		}
		h.rel = time.Now()
		h.mu.Unlock()
		k.Release(context.WithoutCancel(ctx))
	}
}

// serverCPU returns the CPU time etcd has used, in seconds, from its
// metrics.
func serverCPU(e *testserver.Etcd) (float64, error) {
	resp, err := http.Get("http://" + e.Addr() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("etcd metrics lack process_cpu_seconds_total")
}
