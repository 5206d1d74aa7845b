package redlock_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redlock"
)

func TestConformance(t *testing.T) {
	dlocktest.Run(t, harness(clients(t, addrs(startMasters(t, 3)))))
}

// BenchmarkRedlock runs the conformance benchmarks on five masters.
func BenchmarkRedlock(b *testing.B) {
	dlocktest.RunBenchmarks(b, harness(clients(b, addrs(startMasters(b, 5)))))
}

func TestNewValidates(t *testing.T) {
	cs := clients(t, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}) // never dialled
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	for _, tc := range []struct {
		what    string
		clients []redis.UniversalClient
		opts    *redlock.Options
	}{
		{"no clients", nil, nil},
		{"two clients", cs[:2], nil},
		{"a nil client", []redis.UniversalClient{cs[0], cs[1], nil}, nil},
		{"a nil *redis.Client", []redis.UniversalClient{cs[0], cs[1], (*redis.Client)(nil)}, nil},
		{"a cluster client", []redis.UniversalClient{cs[0], cs[1], cluster}, nil},
		{"negative NodeTimeout", cs, &redlock.Options{NodeTimeout: -1}},
		{"DriftFactor 0.5", cs, &redlock.Options{DriftFactor: 0.5}},
		{"negative Drift", cs, &redlock.Options{Drift: -1}},
		{"Drift of a tenth of MinTTL", cs, &redlock.Options{Drift: driver.MinTTL / 10}},
		{"MaxTTL above driver.MaxTTL", cs, &redlock.Options{MaxTTL: 2 * driver.MaxTTL}},
		{"MaxTTL below driver.MinTTL", cs, &redlock.Options{MaxTTL: 1}},
		{"negative MaxRetryInterval", cs, &redlock.Options{MaxRetryInterval: -1}},
	} {
		if l, err := redlock.New(tc.clients, tc.opts); !errors.Is(err, dlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with %s = %v, want ErrInvalid", tc.what, err)
		}
	}
	l, err := redlock.New(cs, &redlock.Options{Prefix: "app:"})
	if err != nil {
		t.Fatalf("New with valid options = %v, want a Locker", err)
	}
	l.Close()
}
