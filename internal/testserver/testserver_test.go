package testserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testserver"
)

// quickClient returns a client that gives up after 300 ms and never retries,
// so that a paused or dead server shows up as an error quickly.
func quickClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  300 * time.Millisecond,
		ReadTimeout:  300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond,
		MaxRetries:   -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ping(c *redis.Client) error {
	return c.Ping(context.Background()).Err()
}

func TestStartRedis(t *testing.T) {
	r := testserver.StartRedis(t)
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", r.Addr())
	}
	if err := ping(r.Client(t)); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	r := testserver.StartRedis(t)
	c := quickClient(t, r.Addr())
	if err := ping(c); err != nil {
		t.Fatalf("PING before Pause: %v", err)
	}
	r.Pause(t)
	if err := ping(c); err == nil {
		t.Fatal("PING to a paused server succeeded")
	}
	r.Resume(t)
	if err := ping(c); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestKill(t *testing.T) {
	r := testserver.StartRedis(t)
	c := quickClient(t, r.Addr())
	r.Kill(t)
	if err := ping(c); err == nil {
		t.Fatal("PING to a killed server succeeded")
	}
	r.Kill(t) // killing twice is harmless
}

func TestRestart(t *testing.T) {
	ctx := context.Background()
	r := testserver.StartRedis(t)
	addr := r.Addr()
	if err := r.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	r.Restart(t)
	if r.Addr() != addr {
		t.Fatalf("Addr() after Restart = %s, want %s", r.Addr(), addr)
	}
	err := r.Client(t).Get(ctx, "k").Err()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after Restart: err = %v, want redis.Nil", err)
	}

	// Restart also works on a killed server.
	r.Kill(t)
	r.Restart(t)
	if err := ping(quickClient(t, addr)); err != nil {
		t.Fatalf("PING after Kill and Restart: %v", err)
	}
}

// TestCleanupKillsPausedServer checks that cleanup does not hang on a paused
// server and leaves nothing listening.
func TestCleanupKillsPausedServer(t *testing.T) {
	var addr string
	t.Run("paused", func(t *testing.T) {
		r := testserver.StartRedis(t)
		addr = r.Addr()
		r.Pause(t)
	})
	if err := ping(quickClient(t, addr)); err == nil {
		t.Fatal("PING after cleanup of a paused server succeeded")
	}
}

func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	c := testserver.StartRedisCluster(t, 3)
	t.Logf("3-master cluster ready in %v", time.Since(start))

	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %v, want 3 addresses", addrs)
	}
	cc := c.Client(t)
	info, err := cc.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	if !strings.Contains(info, "cluster_known_nodes:3\r\n") {
		t.Errorf("CLUSTER INFO lacks cluster_known_nodes:3:\n%s", info)
	}

	const keys = 100
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		got, err := cc.Get(ctx, k).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, got, err, i)
		}
	}
	total := int64(0)
	for _, addr := range addrs {
		n, err := quickClient(t, addr).DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", addr, err)
		}
		if n == 0 {
			t.Errorf("master %s holds no keys", addr)
		}
		total += n
	}
	if total != keys {
		t.Errorf("masters hold %d keys in all, want %d", total, keys)
	}
}

func TestRedisClusterOneMaster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 1)
	if err := c.Client(t).Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
}

// recorder is a testing.TB that records Fatalf and Skipf instead of ending
// the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

func TestNeedMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Setenv("DLOCK_REQUIRE_SERVERS", "")
	rec := &recorder{TB: t}
	if path := testserver.Need(rec, "redis-server", "redis-server"); path != "" {
		t.Errorf("Need returned %q for a missing binary", path)
	}
	want := "redis-server not found; run ./scripts/test (installs servers) or set DLOCK_REQUIRE_SERVERS=1"
	if rec.skip != want || rec.fatal != "" {
		t.Errorf("without DLOCK_REQUIRE_SERVERS: skip = %q, fatal = %q; want skip %q", rec.skip, rec.fatal, want)
	}

	t.Setenv("DLOCK_REQUIRE_SERVERS", "1")
	if !testserver.Require() {
		t.Fatal("Require() = false with DLOCK_REQUIRE_SERVERS=1")
	}
	rec = &recorder{TB: t}
	testserver.Need(rec, "redis-server", "redis-server")
	if rec.skip != "" || !strings.Contains(rec.fatal, "redis-server") || !strings.Contains(rec.fatal, "apt-get install redis-server") {
		t.Errorf("with DLOCK_REQUIRE_SERVERS=1: skip = %q, fatal = %q; want a fatal naming apt-get install redis-server", rec.skip, rec.fatal)
	}
}

func TestRedisClusterFailover(t *testing.T) {
	ctx := context.Background()
	c := testserver.StartRedisClusterReplicated(t, 3)
	if n := len(c.Addrs()); n != 6 {
		t.Fatalf("Addrs() = %v, want 6 nodes", c.Addrs())
	}
	cc := c.Client(t)
	for i := range 20 {
		if err := cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	oldMasters := c.Addrs()[:3]
	c.Failover(t)
	for _, addr := range oldMasters {
		info, err := quickClient(t, addr).Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "role:slave") {
			t.Errorf("old master %s after Failover: %v, want role:slave in\n%s", addr, err, info)
		}
	}
	for i := range 20 { // coordinated failover: nothing acknowledged is lost
		k := fmt.Sprintf("key-%d", i)
		if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
			t.Errorf("GET %s after Failover = %d, %v; want %d", k, got, err, i)
		}
	}
}
