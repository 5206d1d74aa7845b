package testserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name a RedisSentinel monitors.
const SentinelMaster = "dlock"

// RedisSentinel is a Redis master watched by one Sentinel, started by
// StartRedisSentinel.
type RedisSentinel struct {
	Master *Redis
	addr   string
}

// StartRedisSentinel starts a master (as StartRedis does) and a Sentinel
// monitoring it as SentinelMaster with quorum 1, and waits until the
// Sentinel reports the master's address. Both are killed when the test
// ends.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	master := StartRedis(t)
	bin := Need(t, "redis-server", "redis-server")
	dir := t.TempDir()
	args := func(port int) []string {
		// Sentinel needs a writable config file; it rewrites it.
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor %s %s 1\nsentinel down-after-milliseconds %s 5000\n",
			port, dir, SentinelMaster, hostPort(master.Addr()), SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatalf("write sentinel.conf: %v", err)
		}
		return []string{conf, "--sentinel"}
	}
	proc, port := launch(t, bin, dir, 0, false, args, probeRedis)
	t.Cleanup(func() {
		if err := proc.kill(); err != nil {
			t.Errorf("stop redis sentinel: %v", err)
		}
	})
	s := &RedisSentinel{Master: master, addr: redisAddr(port)}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
	defer sc.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cancel()
		if err == nil && len(got) == 2 && got[0]+":"+got[1] == master.Addr() {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel on %s does not report master %s: %v, %v", s.addr, master.Addr(), got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostPort turns "host:port" into the "host port" form of sentinel.conf.
func hostPort(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return host + " " + port
}

// Addr returns the Sentinel's address.
func (s *RedisSentinel) Addr() string { return s.addr }

// Client returns a go-redis failover client that finds the master through
// the Sentinel, closed when the test ends.
func (s *RedisSentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: []string{s.addr}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
