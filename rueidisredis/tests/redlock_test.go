package rueidisredis_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/rueidisredis"
	"github.com/dlock-go/dlock/rueidisredis/internal/testhook"
)

// masters starts n redis-servers and returns a rueidis client on each
// (Redlock's masters) and a go-redis client on each, the adversary's.
func masters(t testing.TB, n int) ([]rueidis.Client, []redis.UniversalClient) {
	t.Helper()
	cs := make([]rueidis.Client, n)
	admins := make([]redis.UniversalClient, n)
	for i := range n {
		r := testserver.StartRedis(t)
		cs[i], admins[i] = newClient(t, r.Addr()), r.Client(t)
	}
	return cs, admins
}

// redlockHarness returns a conformance Harness for redlock on cs (one
// client per master, shared by the Lockers); admins delete keys.
func redlockHarness(cs []rueidis.Client, admins []redis.UniversalClient) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			t.Helper()
			l, err := rueidisredis.NewRedlock(cs, nil)
			if err != nil {
				t.Fatalf("NewRedlock = %v, want a Locker", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			t.Helper()
			ms, err := testhook.Masters(cs)
			if err != nil {
				t.Fatalf("Masters = %v", err)
			}
			l, d, err := redisconn.NewRedlock(ms, nil, false)
			if err != nil {
				t.Fatalf("NewRedlock = %v, want a Locker", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			for _, a := range admins {
				if err := a.Del(t.Context(), redlock.Key("", name)).Err(); err != nil {
					t.Fatalf("DEL %q = %v, want nil", redlock.Key("", name), err)
				}
			}
		},
		// Ping is one round trip to every master at once, as Acquire makes.
		Ping: func(ctx context.Context) error {
			errs := make([]error, len(cs))
			var wg sync.WaitGroup
			for i, c := range cs {
				wg.Go(func() { errs[i] = c.Do(ctx, c.B().Ping().Build()).Error() })
			}
			wg.Wait()
			return errors.Join(errs...)
		},
		NoModes: true, // redlock has exclusive locks only
		TTL:     time.Second,
	}
}

func TestRedlockConformance(t *testing.T) {
	dlocktest.Run(t, redlockHarness(masters(t, 3)))
}

// TestRedlockWaitLeavesNoSubscription checks that a waiter that gave up
// leaves no subscription on the masters (the adversary: a long-lived
// service on one client that waits on ever new names, which would
// otherwise gather a subscription per name on each master: rueidis's
// Receive does not unsubscribe when it returns).
func TestRedlockWaitLeavesNoSubscription(t *testing.T) {
	cs, admins := masters(t, 3)
	l, err := rueidisredis.NewRedlock(cs, nil)
	if err != nil {
		t.Fatalf("NewRedlock = %v", err)
	}
	defer l.Close()
	k, err := l.TryAcquire(t.Context(), "busy")
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	defer k.Release(context.Background())
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := l.Acquire(ctx, "busy")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire %d of a held name = %v, want DeadlineExceeded", i, err)
		}
	}
	// The UNSUBSCRIBEs follow Acquire's return: wait for them, with a
	// liveness bound far above a round trip.
	deadline := time.Now().Add(30 * time.Second)
	for i, a := range admins {
		for {
			chans, err := a.PubSubChannels(t.Context(), "*").Result()
			if err != nil {
				t.Fatalf("PUBSUB CHANNELS on master %d = %v", i, err)
			}
			if len(chans) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("PUBSUB CHANNELS on master %d = %v after the waiters left, want none", i, chans)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestNewRedlockValidates checks the constructor's refusals (the
// adversary: a caller's mistake).
func TestNewRedlockValidates(t *testing.T) {
	cs, _ := masters(t, 3)
	cluster := testserver.StartRedisCluster(t, 3)
	for _, tc := range []struct {
		what    string
		clients []rueidis.Client
	}{
		{"two clients", cs[:2]},
		{"a nil client", []rueidis.Client{cs[0], cs[1], nil}},
		{"a Cluster client", []rueidis.Client{cs[0], cs[1], newClient(t, cluster.Addrs()...)}},
	} {
		if l, err := rueidisredis.NewRedlock(tc.clients, nil); !errors.Is(err, dlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("NewRedlock with %s = %v, want ErrInvalid", tc.what, err)
		}
	}
}

// TestOpenRedlockMinorityDown checks redlock+rueidis:// opens with a
// master down and locks on the others (the adversary: a master that is
// down while a service starts).
func TestOpenRedlockMinorityDown(t *testing.T) {
	a, b := testserver.StartRedis(t), testserver.StartRedis(t)
	dead := "127.0.0.1:1" // nothing listens on port 1
	l, err := dlock.Open(t.Context(), "redlock+rueidis://"+a.Addr()+","+b.Addr()+","+dead)
	if err != nil {
		t.Fatalf("Open with a master down = %v, want a Locker", err)
	}
	defer l.Close()
	k, err := l.TryAcquire(t.Context(), "n")
	if err != nil {
		t.Fatalf("TryAcquire with a master down = %v", err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Errorf("Release = %v", err)
	}
	if _, err := dlock.Open(t.Context(), "redlock+rueidis://"+a.Addr()+","+dead+",127.0.0.1:2"); err == nil {
		t.Errorf("Open with a majority down = nil error, want one")
	}
}
