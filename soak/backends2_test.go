package soak_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/soak"
)

// mntr asks the ZooKeeper server at addr for its monitoring figures.
func mntr(ctx context.Context, addr string) (map[string]float64, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "mntr"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
			out[k] = f
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mntr on %s answered %q", addr, b)
	}
	return out, nil
}

func startZooKeeper(t *testing.T, _ string, _ time.Duration) *target {
	z := testserver.StartZooKeeper(t)
	probe := func(ctx context.Context) map[string]float64 {
		m, err := mntr(ctx, z.Addr())
		if err != nil {
			return nil
		}
		return map[string]float64{
			"server connections": m["zk_num_alive_connections"] - 1, // mntr's own
			"state znodes":       m["zk_znode_count"],
			"state watches":      m["zk_watch_count"], "state ephemerals": m["zk_ephemerals_count"],
			"state data size KB": m["zk_approximate_data_size"] / 1024,
		}
	}
	base := probe(t.Context())["state znodes"] // the server's own: /, /zookeeper, ...
	return &target{
		peak: map[string]float64{"state watches": zkMaxWatches, "state znodes": base + soak.Names + 1 + 1 + zkMaxChildren},
		peakDoc: map[string]string{"state watches": "zklock doc: a waiter watches at most the n children before its own (n = 1 for a lock, the limit for a permit), and each goroutine waits for one name at a time",
			"state znodes": "zklock doc: one container parent per name used (and soak-prepare's), plus /dlock and the server's own, and an ephemeral child per goroutine, three times across a restart (a killed session's children stay until it expires; a wait that ended while the connection was down leaves an orphan until the reaper runs)"},
		url: "zk://" + z.Addr(), fault: "ZooKeeper killed with -9 and restarted (sessions and znodes persist)",
		restart: z.Restart, pids: z.PIDs, probe: probe,
		left: func(t *testing.T) (map[string]float64, map[string]float64, map[string]string) {
			got := probe(t.Context())
			if got == nil {
				t.Fatalf("mntr on %s failed", z.Addr())
			}
			delete(got, "server connections")
			delete(got, "state data size KB")
			return got,
				map[string]float64{"state znodes": base + soak.Names + 1 + 1, "state watches": 0, "state ephemerals": 0},
				map[string]string{"state znodes": "zklock doc: one container parent per name (and soak-prepare's) until the container check, plus /dlock and the server's own",
					"state watches": "a closed session leaves no watch", "state ephemerals": "zklock doc: children are ephemeral"}
		},
	}
}

// etcdRetention is the history the soak keeps: the compaction the
// README will recommend under lock load (periodic, 1 minute), scaled
// down to a fifth of a short run so that compaction happens within it.
// DLOCK_SOAK_ETCD_RETENTION overrides it; 0 turns compaction off (the
// default etcd server, for a before/after comparison).
func etcdRetention(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	if s, ok := os.LookupEnv("DLOCK_SOAK_ETCD_RETENTION"); ok {
		r, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DLOCK_SOAK_ETCD_RETENTION=%q: %v", s, err)
		}
		return r
	}
	return min(time.Minute, max(time.Second, d/5))
}

func startEtcd(t *testing.T, _ string, d time.Duration) *target {
	ret := etcdRetention(t, d)
	var args []string
	if ret > 0 {
		args = []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=" + ret.String()}
	}
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{Args: args})
	c := e.Client(t)
	probe := func(ctx context.Context) map[string]float64 {
		out := map[string]float64{}
		if st, err := c.Status(ctx, e.Addr()); err == nil {
			out["state db size MB"] = float64(st.DbSize) / (1 << 20)
			out["state db in use MB"] = float64(st.DbSizeInUse) / (1 << 20)
			out["revision"] = float64(st.Header.Revision)
		}
		if r, err := c.Get(ctx, etcdlock.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			out["state keys"] = float64(r.Count)
		}
		return out
	}
	return &target{
		url: "etcd://" + e.Addr(), fault: fmt.Sprintf("etcd killed with -9 and restarted (auto-compaction periodic %v)", ret),
		restart: e.Restart, pids: e.PIDs, probe: probe,
		left: func(t *testing.T) (map[string]float64, map[string]float64, map[string]string) {
			// A Locker's Close revokes its leases; a lease orphaned by the
			// restart expires within its TTL: soak.TTL, plus at most a
			// second once rounded up to whole seconds.
			deadline := time.Now().Add(soak.TTL + time.Second + 2*time.Second)
			got := probe(t.Context())
			for got["state keys"] > 0 && time.Now().Before(deadline) {
				time.Sleep(500 * time.Millisecond)
				got = probe(t.Context())
			}
			return map[string]float64{"state keys": got["state keys"]},
				map[string]float64{"state keys": 0},
				map[string]string{"state keys": "etcdlock doc: keys live on the lease of their TTL, revoked by Close or expired within that TTL"}
		},
	}
}
