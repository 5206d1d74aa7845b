package redlock_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{
		"count":     testworker.Count,
		"pause":     pauseWorker,
		"quiet":     quietWorker,
		"tokenhold": testworker.TokenHold,
	})
	os.Exit(m.Run())
}

// startMasters starts n independent redis-servers.
func startMasters(t testing.TB, n int) []*testserver.Redis {
	t.Helper()
	rs := make([]*testserver.Redis, n)
	for i := range rs {
		rs[i] = testserver.StartRedis(t)
	}
	return rs
}

// clients returns a client per server (or per address), closed when the
// test ends.
func clients(t testing.TB, addrs []string) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

func addrs(rs []*testserver.Redis) []string {
	as := make([]string, len(rs))
	for i, r := range rs {
		as[i] = r.Addr()
	}
	return as
}

func mustNew(t testing.TB, cs []redis.UniversalClient, opts *redlock.Options) *dlock.Locker {
	t.Helper()
	l, err := redlock.New(cs, opts)
	if err != nil {
		t.Fatalf("New = %v, want a Locker", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// harness returns a conformance Harness on the masters behind cs.
func harness(cs []redis.UniversalClient) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := redlock.New(cs, nil)
			if err != nil {
				t.Fatalf("New = %v, want a Locker", err)
			}
			return l
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			for _, c := range cs {
				if err := c.Del(t.Context(), redlock.Key("", name)).Err(); err != nil {
					t.Fatalf("DEL %q = %v, want nil", redlock.Key("", name), err)
				}
			}
		},
		// Ping is one round trip to every master at once, as Acquire
		// makes: the benchmarks' round trips are the slowest master's.
		Ping: func(ctx context.Context) error {
			errs := make([]error, len(cs))
			var wg sync.WaitGroup
			for i, c := range cs {
				wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
			}
			wg.Wait()
			return errors.Join(errs...)
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			l, d, err := testhook.New(cs)
			if err != nil {
				t.Fatalf("testhook.New = %v, want a Locker", err)
			}
			return l, d
		},
		NoModes: true,
		TTL:     time.Second,
	}
}

// keysLeft returns how many masters still have a key for name.
func keysLeft(t testing.TB, cs []redis.UniversalClient, name string) int {
	t.Helper()
	n := 0
	for i, c := range cs {
		v, err := c.Exists(context.Background(), redlock.Key("", name)).Result()
		if err != nil {
			t.Fatalf("EXISTS on master %d = %v, want nil", i, err)
		}
		n += int(v)
	}
	return n
}
