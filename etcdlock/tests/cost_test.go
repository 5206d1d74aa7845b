package etcdlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
)

// An uncontended TryAcquire+Release costs two KV requests, each one
// round trip: the transaction that reads the keys ahead and puts the key,
// the one that deletes it; in every mode.
func TestRequestsPerAcquire(t *testing.T) {
	e := testserver.StartEtcd(t)
	counter := &sessionlocktest.RequestCounter{}
	cli := countingClient(t, e.Addr(), counter)
	sessionlocktest.TestRequestsPerAcquire(t, newLocker(t, cli, nil), counter, 2, nil)
}

// countingClient returns a client of addr that counts in counter its
// unary KV requests by method, and its lease grants as "LeaseGrant".
func countingClient(t *testing.T, addr string, counter *sessionlocktest.RequestCounter) *clientv3.Client {
	t.Helper()
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if kind, ok := strings.CutPrefix(method, "/etcdserverpb.KV/"); ok {
			counter.Add(kind)
		} else if method == "/etcdserverpb.Lease/LeaseGrant" {
			counter.Add("LeaseGrant")
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{addr},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
