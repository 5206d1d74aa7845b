package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// harness returns a conformance Harness on the server behind client. Every
// Locker shares client, like the goroutines of one service would.
func harness(client redis.UniversalClient) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker { return mustNew(t, client) },
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			l, d, err := testhook.New(client)
			if err != nil {
				t.Fatalf("testhook.New = %v, want a Locker", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			// One key holds every holder of a name, in any mode.
			if n, err := client.Del(t.Context(), redislock.Key("", name)).Result(); n != 1 || err != nil {
				t.Fatalf("DEL %q = %d, %v; want 1, nil", redislock.Key("", name), n, err)
			}
		},
		Ping: func(ctx context.Context) error { return client.Ping(ctx).Err() },
		Queued: func(t testing.TB, name string) int {
			return int(client.LLen(t.Context(), redislock.Key("", name)+":q").Val())
		},
		TTL: time.Second,
	}
}

func TestConformance(t *testing.T) {
	r := testserver.StartRedis(t)
	dlocktest.Run(t, harness(r.Client(t)))
}

func TestConformanceCluster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 3)
	dlocktest.Run(t, harness(c.Client(t)))
}

func BenchmarkRedis(b *testing.B) {
	r := testserver.StartRedis(b)
	dlocktest.RunBenchmarks(b, harness(r.Client(b)))
}

func TestConformanceSentinel(t *testing.T) {
	s := testserver.StartRedisSentinel(t)
	dlocktest.Run(t, harness(s.Client(t)))
}

func TestNewValidates(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	for _, tc := range []struct {
		what   string
		client redis.UniversalClient
		opts   *redislock.Options
	}{
		{"nil client", nil, nil},
		{"nil *redis.Client", (*redis.Client)(nil), nil},
		{"prefix with a brace", client, &redislock.Options{Prefix: "app{x}:"}},
		{"negative MaxRetryInterval", client, &redislock.Options{MaxRetryInterval: -time.Second}},
		{"negative ClockBound", client, &redislock.Options{ClockBound: -time.Second}},
	} {
		if l, err := redislock.New(tc.client, tc.opts); !errors.Is(err, dlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with %s = %v, want ErrInvalid", tc.what, err)
		}
	}
	l, err := redislock.New(client, &redislock.Options{Prefix: "app:"})
	if err != nil {
		t.Fatalf("New with valid options = %v, want a Locker", err)
	}
	l.Close()
}
