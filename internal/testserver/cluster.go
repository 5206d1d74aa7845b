package testserver

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testkit"
)

const (
	clusterSlots       = 16384
	clusterJoinTimeout = 20 * time.Second
)

// RedisCluster is a Redis Cluster of masters, started by
// StartRedisCluster, and with StartRedisClusterReplicated a replica of
// each.
type RedisCluster struct {
	addrs    []string // every node, masters first
	replicas []string // the replicas, in the order of their masters
}

// StartRedisCluster starts masters redis-server processes in cluster mode,
// each on its own free loopback port and in its own temporary directory,
// assigns each an equal share of the 16384 hash slots and joins them into one
// cluster. It returns once every node reports cluster_state:ok, knows all
// nodes and maps all slots to them. All nodes are killed when the test ends.
// If redis-server is not installed, StartRedisCluster skips the test (see
// Need).
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	return startCluster(t, masters, false)
}

// StartRedisClusterReplicated is StartRedisCluster with a replica of each
// master, in sync before it returns, so that Failover can promote them.
func StartRedisClusterReplicated(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	return startCluster(t, masters, true)
}

func startCluster(t testing.TB, masters int, replicated bool) *RedisCluster {
	t.Helper()
	if masters < 1 || masters > clusterSlots {
		t.Fatalf("StartRedisCluster: masters = %d, want 1 to %d", masters, clusterSlots)
	}
	bin := Need(t, "redis-server", "redis-server")
	c := &RedisCluster{}
	var procs []*process
	t.Cleanup(func() {
		for i, p := range procs {
			if err := p.kill(); err != nil {
				t.Errorf("stop redis-server cluster node %s: %v", c.addrs[i], err)
			}
		}
	})
	nodes := masters
	if replicated {
		nodes *= 2
	}
	for range nodes {
		dir := t.TempDir()
		args := func(port int) []string {
			return append(redisArgs(port, dir),
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000",
				// Without this a node that was never sent a MEET (the
				// only node of a one-master cluster) does not know its
				// own address and reports its slots on host "".
				"--cluster-announce-ip", "127.0.0.1",
			)
		}
		p, port := launch(t, bin, dir, 0, true, args, probeRedis)
		procs = append(procs, p)
		c.addrs = append(c.addrs, redisAddr(port))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterJoinTimeout)
	defer cancel()
	all := make([]*redis.Client, nodes)
	for i, addr := range c.addrs {
		all[i] = redis.NewClient(&redis.Options{Addr: addr})
		defer all[i].Close()
	}
	if replicated {
		c.replicas = c.addrs[masters:]
	}
	// Like redis-cli --cluster create (which needs at least 3 masters): give
	// each node its slots and a distinct config epoch, then introduce the
	// nodes to each other. Meeting every pair directly, rather than only the
	// first node, saves waiting for gossip: the cluster is ready after about
	// 2 s (Redis keeps a new master unwritable that long) instead of 2-5 s.
	for i, n := range all[:masters] {
		first, last := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		if err := n.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTS %d-%d on %s: %v", first, last, c.addrs[i], err)
		}
		if err := n.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("CLUSTER SET-CONFIG-EPOCH on %s: %v", c.addrs[i], err)
		}
	}
	for i, n := range all {
		for _, addr := range c.addrs[i+1:] {
			port := addr[strings.LastIndexByte(addr, ':')+1:]
			if err := n.ClusterMeet(ctx, "127.0.0.1", port).Err(); err != nil {
				t.Fatalf("CLUSTER MEET %s from %s: %v", addr, c.addrs[i], err)
			}
		}
	}

	c.waitReady(t, ctx, all, procs)
	if !replicated {
		return c
	}
	for i, r := range all[masters:] {
		id, err := all[i].ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", c.addrs[i], err)
		}
		if err := r.ClusterReplicate(ctx, id).Err(); err != nil {
			t.Fatalf("CLUSTER REPLICATE %s on %s: %v", c.addrs[i], c.replicas[i], err)
		}
	}
	for i, r := range all[masters:] {
		testkit.Retry(t, "cluster replica "+c.replicas[i]+" in sync", func(ctx context.Context) error {
			return replicationHas(ctx, r, "master_link_status:up")
		})
	}
	c.waitReady(t, ctx, all, procs)
	return c
}

// waitReady waits until every node agrees on the cluster.
func (c *RedisCluster) waitReady(t testing.TB, ctx context.Context, all []*redis.Client, procs []*process) {
	t.Helper()
	for i, n := range all {
		var err error
		for {
			if err = clusterReady(ctx, n, c.addrs); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("redis cluster %v not ready within %v: node %s: %v; last lines of its log:\n%s",
					c.addrs, clusterJoinTimeout, c.addrs[i], err, procs[i].logTail())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// Failover makes every replica take over from its master (CLUSTER
// FAILOVER, coordinated with the master so that no acknowledged write is
// lost) and waits until each is a master and the cluster agrees. The old
// masters become their replicas, so Failover can be called again.
func (c *RedisCluster) Failover(t testing.TB) {
	t.Helper()
	if len(c.replicas) == 0 {
		t.Fatalf("Failover: the cluster has no replicas (use StartRedisClusterReplicated)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterJoinTimeout)
	defer cancel()
	var promoted []string
	for _, addr := range c.replicas {
		r := redis.NewClient(&redis.Options{Addr: addr})
		defer r.Close()
		if err := r.ClusterFailover(ctx).Err(); err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", addr, err)
		}
		testkit.Retry(t, "cluster replica "+addr+" promoted", func(ctx context.Context) error {
			return replicationHas(ctx, r, "role:master")
		})
		promoted = append(promoted, addr)
	}
	masters := len(c.addrs) - len(c.replicas)
	c.replicas = slices.Clone(c.addrs[:masters])
	c.addrs = append(promoted, c.replicas...)
	for _, addr := range c.replicas {
		// An old master turns itself into a replica only when gossip
		// brings it the promoted node's newer epoch, some time after the
		// promoted node already answers as a master.
		n := redis.NewClient(&redis.Options{Addr: addr})
		defer n.Close()
		testkit.Retry(t, "old master "+addr+" a replica", func(ctx context.Context) error {
			return replicationHas(ctx, n, "role:slave")
		})
	}
	for _, addr := range c.addrs {
		n := redis.NewClient(&redis.Options{Addr: addr})
		defer n.Close()
		testkit.Retry(t, "cluster agrees after failover at "+addr, func(ctx context.Context) error {
			return clusterReady(ctx, n, c.addrs)
		})
	}
}

// clusterReady checks that node reports cluster_state:ok, knows exactly the
// nodes addrs and maps every hash slot to one of them.
func clusterReady(ctx context.Context, node *redis.Client, addrs []string) error {
	info, err := node.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok\r\n") {
		return fmt.Errorf("cluster_state is not ok")
	}
	if want := "cluster_known_nodes:" + strconv.Itoa(len(addrs)) + "\r\n"; !strings.Contains(info, want) {
		return fmt.Errorf("CLUSTER INFO lacks %q", strings.TrimSpace(want))
	}
	// CLUSTER SHARDS (Redis 7) replaces the deprecated CLUSTER SLOTS.
	shards, err := node.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	covered := 0
	for _, s := range shards {
		if len(s.Slots) == 0 {
			continue // a shard without slots (a node not yet assigned any)
		}
		var master string
		for _, n := range s.Nodes {
			if n.Role == "master" {
				master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			}
		}
		if !slices.Contains(addrs, master) {
			return fmt.Errorf("slots %v served by unknown node %q", s.Slots, master)
		}
		for _, r := range s.Slots {
			covered += int(r.End - r.Start + 1)
		}
	}
	if covered != clusterSlots {
		return fmt.Errorf("CLUSTER SHARDS covers %d of %d slots", covered, clusterSlots)
	}
	return nil
}

// Addrs returns the addresses of the cluster's nodes, "127.0.0.1:port".
func (c *RedisCluster) Addrs() []string {
	return slices.Clone(c.addrs)
}

// Client returns a new go-redis cluster client for the cluster, closed when
// the test ends.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
