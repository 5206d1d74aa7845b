package etcdlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// requestCounter counts the KV requests a client sends, by method.
type requestCounter struct {
	mu sync.Mutex
	by map[string]int
}

func (c *requestCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasPrefix(method, "/etcdserverpb.KV/") {
		c.mu.Lock()
		c.by[method]++
		c.mu.Unlock()
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

func (c *requestCounter) take() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.by {
		n += v
	}
	by := c.by
	c.by = make(map[string]int)
	return n, by
}

// An uncontended exclusive TryAcquire+Release costs three KV requests,
// each one round trip: the transaction that puts the key, the one that
// reads its place in the queue, the one that deletes it. Shared holds and
// permits cost the same.
func TestRequestsPerAcquire(t *testing.T) {
	e := testserver.StartEtcd(t)
	counter := &requestCounter{by: make(map[string]int)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Addr()},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)},
	})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	defer cli.Close()
	l := newLocker(t, cli, nil)
	for _, c := range []struct {
		what string
		opts []dlock.Option
	}{
		{"exclusive", nil},
		{"shared", []dlock.Option{dlock.Shared()}},
		{"permit", []dlock.Option{dlock.WithLimit(4)}},
	} {
		name := "cost/" + c.what
		once := func() {
			k, err := l.TryAcquire(t.Context(), name, c.opts...)
			if err != nil {
				t.Fatalf("TryAcquire(%q) %s = %v", name, c.what, err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("Release = %v", err)
			}
		}
		once() // the first acquisition grants the session lease
		counter.take()
		const rounds = 20
		for range rounds {
			once()
		}
		n, by := counter.take()
		t.Logf("%s TryAcquire+Release: %.2f KV requests (%v)", c.what, float64(n)/rounds, by)
		if n != 3*rounds {
			t.Errorf("%s TryAcquire+Release costs %.2f KV requests, want 3", c.what, float64(n)/rounds)
		}
	}
}
