package natslock_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/natslock"
)

// bucket connects to url and creates the KV bucket name with replicas
// (history 1); the connection is closed at the end of the test.
func bucket(t testing.TB, url, name string, replicas int) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("nats.Connect(%s) = %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, Replicas: replicas})
	if err != nil {
		t.Fatalf("CreateKeyValue(%s) = %v", name, err)
	}
	return kv
}

// newLocker returns a Locker on kv, closed at the end of the test.
func newLocker(t testing.TB, kv jetstream.KeyValue) *dlock.Locker {
	t.Helper()
	l, err := natslock.New(kv, nil)
	if err != nil {
		t.Fatalf("natslock.New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// harness returns a conformance Harness on kv. Every Locker shares kv's
// connection, like the goroutines of one service would.
func harness(kv jetstream.KeyValue) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := natslock.New(kv, nil)
			if err != nil {
				t.Fatalf("natslock.New = %v", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			d, err := natslock.NewDriver(kv, nil)
			if err != nil {
				t.Fatalf("natslock.NewDriver = %v", err)
			}
			return dlock.NewLocker(d, driver.LockerOptions{}), d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			if err := kv.Delete(t.Context(), natslock.Key("", name)); err != nil {
				t.Fatalf("Delete(%q) = %v; want the holder's key deleted", natslock.Key("", name), err)
			}
		},
		Ping: func(ctx context.Context) error { _, err := kv.Status(ctx); return err },
		TTL:  time.Second,
	}
}

func TestConformance(t *testing.T) {
	n := testserver.StartNATS(t)
	dlocktest.Run(t, harness(bucket(t, n.URL(), "conformance", 1)))
}

func BenchmarkNATS(b *testing.B) {
	n := testserver.StartNATS(b)
	dlocktest.RunBenchmarks(b, harness(bucket(b, n.URL(), "bench", 1)))
}
