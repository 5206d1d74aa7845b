package rueidisredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/rueidisredis"
	"github.com/dlock-go/dlock/rueidisredis/internal/testhook"
)

// harness returns a conformance Harness whose Lockers run on client (a
// rueidis client shared by all of them, as a service's goroutines would
// share it); admin, a go-redis client on the same server, plays the
// adversary that deletes keys and counts queues.
func harness(client rueidis.Client, admin redis.UniversalClient) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			t.Helper()
			l, err := rueidisredis.NewLocker(client, nil)
			if err != nil {
				t.Fatalf("NewLocker = %v, want a Locker", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			t.Helper()
			l, d, err := redisconn.NewRedislock(testhook.Conn(client), nil, false)
			if err != nil {
				t.Fatalf("NewRedislock = %v, want a Locker", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			// One key holds every holder of a name, in any mode.
			if n, err := admin.Del(t.Context(), redislock.Key("", name)).Result(); n != 1 || err != nil {
				t.Fatalf("DEL %q = %d, %v; want 1, nil", redislock.Key("", name), n, err)
			}
		},
		Ping: func(ctx context.Context) error { return client.Do(ctx, client.B().Ping().Build()).Error() },
		Queued: func(t testing.TB, name string) int {
			return int(admin.LLen(t.Context(), redislock.Key("", name)+":q").Val())
		},
		TTL: time.Second,
	}
}

// newClient returns a rueidis client on addrs, closed when the test ends.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v) = %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestConformance(t *testing.T) {
	r := testserver.StartRedis(t)
	dlocktest.Run(t, harness(newClient(t, r.Addr()), r.Client(t)))
}

func TestConformanceCluster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 3)
	dlocktest.Run(t, harness(newClient(t, c.Addrs()...), c.Client(t)))
}

// TestSharesNamesWithGoRedis checks that a Locker on this client and one
// on go-redis exclude each other on a name (the adversary: a service
// half-migrated from one client to the other).
func TestSharesNamesWithGoRedis(t *testing.T) {
	r := testserver.StartRedis(t)
	mine, err := rueidisredis.NewLocker(newClient(t, r.Addr()), nil)
	if err != nil {
		t.Fatalf("NewLocker = %v", err)
	}
	defer mine.Close()
	theirs, err := redislock.New(r.Client(t), nil)
	if err != nil {
		t.Fatalf("redislock.New = %v", err)
	}
	defer theirs.Close()
	k, err := mine.TryAcquire(t.Context(), "shared")
	if err != nil {
		t.Fatalf("TryAcquire on this client = %v", err)
	}
	if _, err := theirs.TryAcquire(t.Context(), "shared"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on go-redis while held = %v, want ErrNotAcquired", err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	k2, err := theirs.TryAcquire(t.Context(), "shared")
	if err != nil {
		t.Fatalf("TryAcquire on go-redis after release = %v", err)
	}
	if k2.Fence() <= k.Fence() {
		t.Errorf("go-redis's token %d after this client's %d, want higher", k2.Fence(), k.Fence())
	}
	k2.Release(t.Context())
}

// TestNewValidates checks the constructor's refusals (the adversary: a
// caller's mistake).
func TestNewValidates(t *testing.T) {
	if _, err := rueidisredis.NewLocker(nil, nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewLocker(nil) = %v, want ErrInvalid", err)
	}
}

// TestCloseMidDialLeavesNoConnection checks that a client's Close leaves
// no connection open, even one that a call in flight was dialing as the
// client closed (the adversary: redlock's Close, which closes its
// clients while a slow master's step still runs; the fault suite's leak
// check found one socket left open after Close under clock-back-5s).
// rueidis's Close marks the client's connection slot closed without
// stopping a dial, which then stores its new connection over the mark.
func TestCloseMidDialLeavesNoConnection(t *testing.T) {
	r := testserver.StartRedis(t)
	admin := r.Client(t)
	p := testserver.StartProxy(t, r.Addr())
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true, ForceSingleClient: true, DisableRetry: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient = %v", err)
	}
	c := testhook.Conn(client)
	ping := func(ctx context.Context) error {
		return c.Pipeline(ctx, []redisconn.Cmd{{Name: []string{"ping"}}})[0].Err
	}
	if err := ping(t.Context()); err != nil {
		t.Fatalf("PING = %v", err)
	}
	// The connection breaks, and new ones carry nothing until Heal: the
	// next call's dial waits in its handshake.
	p.Partition(t)
	p.ResetConnections(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	calls := make(chan struct{})
	go func() { // ends when a call succeeds or ctx ends (cancelled below)
		defer close(calls)
		for ctx.Err() == nil && ping(ctx) != nil {
		}
	}()
	// The server sees the dial's connection (the proxy connects through
	// at once) before any command on it.
	if !testkit.Poll(30*time.Second, func() bool { return len(clients(t, admin, "cmd=NULL")) > 0 }) {
		t.Fatalf("no new connection reached the server: %v", clients(t, admin, ""))
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	p.Heal(t) // the dial completes, after Close
	<-calls
	cancel()
	// The admin's is the only connection left (Redis before 7.2 does not
	// keep the clients' library names).
	if !testkit.Poll(30*time.Second, func() bool { return len(clients(t, admin, "")) == 0 }) {
		t.Fatalf("the server still has the closed client's connection 30s after the dial ended: %v", clients(t, admin, ""))
	}
}

// clients returns the lines of CLIENT LIST that contain sub, but for the
// admin's own.
func clients(t testing.TB, admin redis.UniversalClient, sub string) []string {
	t.Helper()
	list, err := admin.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST = %v", err)
	}
	var out []string
	for line := range strings.Lines(list) {
		if strings.Contains(line, sub) && !strings.Contains(line, "cmd=client|list") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
