package jepsen_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite"

	_ "github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/jepsen"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	_ "github.com/dlock-go/dlock/memlock"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/zklock"
)

var report jepsen.Report

func TestMain(m *testing.M) {
	testworker.Run(jepsen.Workers)
	code := m.Run()
	if path := os.Getenv("DLOCK_JEPSEN_REPORT"); path != "" {
		if err := report.WriteFile(path, "dlock under faults: "+options().Duration.String()+" before and after each fault"); err != nil {
			os.Stderr.WriteString("jepsen report: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// options are the short mode's, unless DLOCK_JEPSEN_DURATION (make
// verify) asks for longer runs.
func options() jepsen.Options {
	var o jepsen.Options
	if d, err := time.ParseDuration(os.Getenv("DLOCK_JEPSEN_DURATION")); err == nil {
		o.Duration = d
	}
	return o
}

// run puts target through every nemesis.
func run(t *testing.T, target jepsen.Target) {
	for _, r := range jepsen.RunAll(t, target, options()) {
		report.Add(r)
	}
}

// TestJepsen runs every target at once: t.Run from a goroutine per
// target, not t.Parallel, which -parallel (GOMAXPROCS by default) would
// limit to two at a time although the workers mostly wait.
func TestJepsen(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	target := func(name string, f func(t *testing.T)) {
		wg.Go(func() { t.Run(name, f) })
	}
	target("memlock", func(t *testing.T) {
		run(t, jepsen.Target{Name: "memlock", URL: func(string) string { return "mem://jepsen" }, InProcess: true})
	})
	target("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "locks.db")
		run(t, jepsen.Target{Name: "sqlite", URL: func(string) string { return "sqlite://" + path }})
	})
	target("redis", func(t *testing.T) {
		r := testserver.StartRedis(t)
		run(t, jepsen.Target{
			Name:     "redis",
			URL:      func(addr string) string { return "redis://" + addr },
			Upstream: r.Addr(),
			Server:   r,
			Forgets:  []string{"restart-server"}, // no persistence: restarted empty
		})
	})
	target("redis-cluster", func(t *testing.T) {
		c := testserver.StartRedisClusterReplicated(t, 3)
		// The cluster redirects clients to each node's own address, past
		// any proxy: the network faults do not apply.
		run(t, jepsen.Target{
			Name: "redis-cluster",
			URL:  func(string) string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") },
			// CLUSTER FAILOVER waits for the replica to catch up: no lock
			// should be lost, but replication stays asynchronous.
			Failover: c.Failover,
			Forgets:  []string{"failover"},
		})
	})
	target("redis-sentinel", func(t *testing.T) {
		s := testserver.StartRedisSentinelReplicated(t)
		run(t, jepsen.Target{
			Name:   "redis-sentinel",
			URL:    func(string) string { return "redis+sentinel://" + s.Addr() + "/" + testserver.SentinelMaster },
			Server: s.Master,
			// Replication is asynchronous: a failover can lose the latest
			// lock writes, and a restarted master comes back empty.
			Failover: s.Failover,
			Forgets:  []string{"restart-server", "failover"},
		})
	})
	target("mariadb", func(t *testing.T) {
		m := testserver.StartMariaDB(t)
		c, err := mysql.ParseDSN(m.DSN())
		if err != nil {
			t.Fatal(err)
		}
		run(t, jepsen.Target{
			Name:     "mariadb",
			URL:      func(addr string) string { return "mysql://" + c.User + "@" + addr + "/" + c.DBName },
			Upstream: c.Addr,
			Server:   m,
		})
	})
	target("postgres", func(t *testing.T) {
		p := testserver.StartPostgres(t)
		addr := strings.TrimPrefix(strings.SplitN(p.DSN(), "/", 4)[2], "postgres@")
		run(t, jepsen.Target{
			Name:     "postgres",
			URL:      func(addr string) string { return "postgres://postgres@" + addr + "/postgres" },
			Upstream: addr,
			Server:   p,
		})
	})
	target("zookeeper", func(t *testing.T) {
		z := testserver.StartZooKeeper(t)
		run(t, jepsen.Target{
			Name:     "zookeeper",
			URL:      func(addr string) string { return "zk://" + addr + "?session_timeout=4s" },
			Upstream: z.Addr(),
			Server:   z,
			// A lock lives in its holder's session (zklock's doc).
			DeadHolderLease: 4 * time.Second,
		})
	})
	target("etcd", func(t *testing.T) {
		e := testserver.StartEtcd(t)
		run(t, jepsen.Target{
			Name:     "etcd",
			URL:      func(addr string) string { return "etcd://" + addr + "?session_ttl=3s" },
			Upstream: e.Addr(),
			Server:   e,
			// A lock lives in its holder's session lease (etcdlock's doc).
			DeadHolderLease: 3 * time.Second,
		})
	})
}
