package testserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
)

// SentinelMaster is the master name a RedisSentinel monitors.
const SentinelMaster = "dlock"

// RedisSentinel is a Redis master watched by one Sentinel, started by
// StartRedisSentinel, and with StartRedisSentinelReplicated a replica.
type RedisSentinel struct {
	Master  *Redis
	Replica *Redis // nil without one
	addr    string
}

// StartRedisSentinel starts a master (as StartRedis does) and a Sentinel
// monitoring it as SentinelMaster with quorum 1, and waits until the
// Sentinel reports the master's address. Both are killed when the test
// ends.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	return startSentinel(t, StartRedis(t), nil)
}

// StartRedisSentinelReplicated is StartRedisSentinel with a replica of the
// master, in sync and known to the Sentinel before it returns, so that
// Failover can promote it.
func StartRedisSentinelReplicated(t testing.TB) *RedisSentinel {
	t.Helper()
	return StartRedisSentinelReplicatedWith(t, RedisOptions{})
}

// StartRedisSentinelReplicatedWith is StartRedisSentinelReplicated with
// the master and the replica started by StartRedisWith(t, o): e.g. both
// on one Clock, the store's, which the test steps. The Sentinel itself
// keeps the host's clock.
func StartRedisSentinelReplicatedWith(t testing.TB, o RedisOptions) *RedisSentinel {
	t.Helper()
	master, replica := StartRedisWith(t, o), StartRedisWith(t, o)
	c := replica.Client(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	if err := c.ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatalf("REPLICAOF %s: %v", master.Addr(), err)
	}
	testkit.Retry(t, "replica "+replica.Addr()+" in sync", func(ctx context.Context) error {
		return replicationHas(ctx, c, "master_link_status:up")
	})
	s := startSentinel(t, master, replica)
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
	defer sc.Close()
	// Sentinel promotes only a replica it has itself polled lately (INFO)
	// and found linked to the master.
	testkit.Retry(t, "sentinel has polled the replica", func(ctx context.Context) error {
		rs, err := sc.Replicas(ctx, SentinelMaster).Result()
		if err != nil || len(rs) != 1 {
			return fmt.Errorf("SENTINEL REPLICAS = %v, %v, want one", rs, err)
		}
		refreshed, err := strconv.Atoi(rs[0]["info-refresh"])
		if err != nil || refreshed >= 5000 || rs[0]["master-link-status"] != "ok" {
			return fmt.Errorf("replica info-refresh %q, master-link-status %q, want under 5000 and ok",
				rs[0]["info-refresh"], rs[0]["master-link-status"])
		}
		return nil
	})
	return s
}

// Failover makes the Sentinel promote the replica (SENTINEL FAILOVER) and
// waits until the Sentinel names it as the master and it accepts writes.
func (s *RedisSentinel) Failover(t testing.TB) {
	t.Helper()
	if s.Replica == nil {
		t.Fatal("Failover: no replica")
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
	defer sc.Close()
	if err := sc.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	c := s.Replica.Client(t)
	testkit.Retry(t, "the replica promoted", func(ctx context.Context) error {
		if err := sentinelNames(ctx, sc, s.Replica.Addr()); err != nil {
			return err
		}
		return replicationHas(ctx, c, "role:master")
	})
}

// replicationHas checks that INFO replication on c has the line field
// ("role:master", "master_link_status:up").
func replicationHas(ctx context.Context, c *redis.Client, field string) error {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, field) {
		return fmt.Errorf("INFO replication of %s has no %s", c.Options().Addr, field)
	}
	return nil
}

// sentinelNames checks that the Sentinel sc names addr as the master.
func sentinelNames(ctx context.Context, sc *redis.SentinelClient, addr string) error {
	got, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return err
	}
	if len(got) != 2 || got[0]+":"+got[1] != addr {
		return fmt.Errorf("sentinel names master %v, want %s", got, addr)
	}
	return nil
}

func startSentinel(t testing.TB, master, replica *Redis) *RedisSentinel {
	t.Helper()
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
	s := &RedisSentinel{Master: master, Replica: replica, addr: redisAddr(port)}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
	defer sc.Close()
	testkit.Retry(t, "sentinel on "+s.addr+" reports master "+master.Addr(), func(ctx context.Context) error {
		return sentinelNames(ctx, sc, master.Addr())
	})
	return s
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
