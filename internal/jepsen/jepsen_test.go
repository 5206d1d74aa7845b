package jepsen_test

import (
	"os"
	"path/filepath"
	"slices"
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
	_ "github.com/dlock-go/dlock/kubelock"
	_ "github.com/dlock-go/dlock/memlock"
	_ "github.com/dlock-go/dlock/natslock"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/redlock"
	_ "github.com/dlock-go/dlock/rueidisredis"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/sqllock/mysql"
	_ "github.com/dlock-go/dlock/sqllock/postgres"
	_ "github.com/dlock-go/dlock/valkeyredis"
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

// semaphoreNemeses are the faults the semaphore runs go through: those
// that take a holder away or cut it off, and the server's own.
var semaphoreNemeses = []string{"none", "kill-holder", "pause-holder", "partition-holder", "restart-server", "failover"}

// targets are the stores under test. Each starts its servers for the
// test or benchmark at hand, stopped at its end.
var targets = []struct {
	name string
	make func(t testing.TB) jepsen.Target
}{
	{"memlock", func(t testing.TB) jepsen.Target {
		return jepsen.Target{Name: "memlock", URL: func(string) string { return "mem://jepsen" }, InProcess: true}
	}},
	{"sqlite", func(t testing.TB) jepsen.Target {
		path := filepath.Join(t.TempDir(), "locks.db")
		// SQLite's clock is each worker's own: they put it on this one.
		return jepsen.Target{Name: "sqlite", URL: func(string) string { return "sqlite://" + path },
			Clocks: []*testserver.Clock{testserver.NewClock(t)}, SQLiteClock: true}
	}},
	{"redis", redisTarget("redis", "redis")},
	// redislock on the other clients (rueidisredis, valkeyredis): the
	// same server and faults as redis.
	{"redis-rueidis", redisTarget("redis-rueidis", "redis+rueidis")},
	{"redis-valkey", redisTarget("redis-valkey", "redis+valkey")},
	// Each worker process runs two workers sharing its Locker, so that a
	// Locker has two waiters of the name at once and hands it on within
	// its line (redislock's lines) under every fault of redis.
	{"redis-lines", func(t testing.TB) jepsen.Target {
		target := redisTarget("redis-lines", "redis")(t)
		target.Shared = 2
		return target
	}},
	{"redis-aof", func(t testing.TB) jepsen.Target {
		c := testserver.NewClock(t)
		r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c, Persistent: true})
		return jepsen.Target{
			Name:     "redis-aof",
			URL:      func(addr string) string { return "redis://" + addr },
			Upstream: r.Addr(),
			Server:   r,
			Clocks:   []*testserver.Clock{c},
			// Persistent (AOF, fsync before each reply): a restart
			// forgets nothing, and no token may go down.
		}
	}},
	{"redis-cluster", func(t testing.TB) jepsen.Target {
		c := testserver.StartRedisClusterReplicated(t, 3)
		// The cluster redirects clients to each node's own address, past
		// any proxy: the network faults do not apply.
		return jepsen.Target{
			Name: "redis-cluster",
			URL:  func(string) string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") },
			// CLUSTER FAILOVER waits for the replica to catch up: no lock
			// should be lost, but replication stays asynchronous.
			Failover: c.Failover,
			Forgets:  []string{"failover"},
		}
	}},
	{"redis-sentinel", func(t testing.TB) jepsen.Target {
		// The master and the replica share one clock, the store's.
		c := testserver.NewClock(t)
		s := testserver.StartRedisSentinelReplicatedWith(t, testserver.RedisOptions{Clock: c})
		return jepsen.Target{
			Name:   "redis-sentinel",
			URL:    func(string) string { return "redis+sentinel://" + s.Addr() + "/" + testserver.SentinelMaster },
			Server: s.Master,
			Clocks: []*testserver.Clock{c},
			// Replication is asynchronous: a failover can lose the latest
			// lock writes, and a restarted master comes back empty (and
			// after a step back of its clock, its tokens may go down).
			Failover:      s.Failover,
			Forgets:       []string{"restart-server", "failover", "clock-back-restart-server"},
			InvertsTokens: []string{"clock-back-restart-server"},
		}
	}},
	{"redis-sentinel-wait", func(t testing.TB) jepsen.Target {
		s := testserver.StartRedisSentinelReplicated(t)
		return jepsen.Target{
			Name: "redis-sentinel-wait",
			URL: func(string) string {
				return "redis+sentinel://" + s.Addr() + "/" + testserver.SentinelMaster + "?wait_replicas=1"
			},
			Server: s.Master,
			// Every lock write was acknowledged by the replica before it
			// counted, so the failover keeps it; a restarted master still
			// comes back empty.
			Failover: s.Failover,
			Forgets:  []string{"restart-server"},
		}
	}},
	{"redlock", redlockTarget("redlock", "redlock")},
	// redlock on rueidis and valkey-go clients (rueidisredis,
	// valkeyredis): the same masters and faults as redlock.
	{"redlock-rueidis", redlockTarget("redlock-rueidis", "redlock+rueidis")},
	{"redlock-valkey", redlockTarget("redlock-valkey", "redlock+valkey")},
	{"mariadb", func(t testing.TB) jepsen.Target {
		clock := testserver.NewClock(t)
		m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{Clock: clock})
		c, err := mysql.ParseDSN(m.DSN())
		if err != nil {
			t.Fatal(err)
		}
		return jepsen.Target{
			Name:     "mariadb",
			URL:      func(addr string) string { return "mysql://" + c.User + "@" + addr + "/" + c.DBName },
			Upstream: c.Addr,
			Server:   m,
			Clocks:   []*testserver.Clock{clock},
		}
	}},
	{"postgres", func(t testing.TB) jepsen.Target {
		clock := testserver.NewClock(t)
		p := testserver.StartPostgresClock(t, clock)
		addr := strings.TrimPrefix(strings.SplitN(p.DSN(), "/", 4)[2], "postgres@")
		return jepsen.Target{
			Name:     "postgres",
			URL:      func(addr string) string { return "postgres://postgres@" + addr + "/postgres" },
			Upstream: addr,
			Server:   p,
			Clocks:   []*testserver.Clock{clock},
		}
	}},
	{"zookeeper", func(t testing.TB) jepsen.Target {
		z := testserver.StartZooKeeper(t)
		return jepsen.Target{
			Name:     "zookeeper",
			URL:      func(addr string) string { return "zk://" + addr + "?session_timeout=4s" },
			Upstream: z.Addr(),
			Server:   z,
			// A lock lives in its holder's session (zklock's doc).
			DeadHolderLease: 4 * time.Second,
		}
	}},
	{"etcd", func(t testing.TB) jepsen.Target {
		e := testserver.StartEtcd(t)
		return jepsen.Target{
			Name:     "etcd",
			URL:      func(addr string) string { return "etcd://" + addr }, // a lease per lock TTL, the default
			Upstream: e.Addr(),
			Server:   e,
			// A lock lives in the lease of its TTL, which etcd raises to its
			// minimum (about 2 s) for the suite's 1 s TTL (etcdlock's doc).
			DeadHolderLease: 3 * time.Second,
		}
	}},
	{"nats", func(t testing.TB) jepsen.Target {
		n := testserver.StartNATS(t)
		return jepsen.Target{
			Name:     "nats",
			URL:      func(addr string) string { return "nats://" + addr + "/jepsen" },
			Upstream: n.Addr(),
			Server:   n,
			// A dead holder's hold is taken out by a waiter that saw it
			// unchanged for its TTL from its first look: up to TTL plus
			// the renewal interval after the holder's last renewal. No
			// Clocks: a Go server's clock cannot be stepped (and
			// natslock reads none). A kill -9 and restart keeps the
			// stream (-sd, written before each ack), so nothing is
			// forgotten and no token goes down.
			DeadHolderLease: 2 * time.Second,
		}
	}},
	{"kube", func(t testing.TB) jepsen.Target {
		k := testserver.StartKube(t)
		k.GrantLeases(t, "default")
		return jepsen.Target{
			Name: "kube",
			URL: func(addr string) string {
				return "kube:///default?kubeconfig=" + k.WriteKubeconfig(t, testserver.KubeUser, "https://"+addr, "default")
			},
			Upstream: strings.TrimPrefix(k.URL(), "https://"),
			Server:   k,
			// A dead holder's Lease is taken once a waiter has seen it
			// unchanged for its leaseDurationSeconds: the 1 s TTL rounded
			// up, plus one (kubelock's doc).
			DeadHolderLease: 3 * time.Second,
		}
	}}}

// redisTarget is a single Redis server without persistence, opened by
// workers with URLs of scheme (which picks the client).
func redisTarget(name, scheme string) func(t testing.TB) jepsen.Target {
	return func(t testing.TB) jepsen.Target {
		c := testserver.NewClock(t)
		r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c})
		return jepsen.Target{
			Name:     name,
			URL:      func(addr string) string { return scheme + "://" + addr },
			Upstream: r.Addr(),
			Server:   r,
			Clocks:   []*testserver.Clock{c},
			// No persistence: restarted empty. After a step back of its
			// clock, the tokens may then go down (the documented
			// exception; redis-aof below must show none).
			Forgets:       []string{"restart-server", "clock-back-restart-server"},
			InvertsTokens: []string{"clock-back-restart-server"},
		}
	}
}

// redlockTarget is three Redis masters without persistence, opened by
// workers with URLs of scheme (which picks the client).
func redlockTarget(name, scheme string) func(t testing.TB) jepsen.Target {
	return func(t testing.TB) jepsen.Target {
		// Three independent masters; the faults hit the first: its
		// network (a proxy per worker), a pause, a restart empty. A
		// minority lost or forgetting must not let a second holder in
		// (the restart defence), so the run is not lossy.
		// Each master has a clock of its own: the clock nemeses step them
		// all, clock-one-forward-5s only the last's.
		var m []*testserver.Redis
		var clocks []*testserver.Clock
		for range 3 {
			c := testserver.NewClock(t)
			clocks = append(clocks, c)
			m = append(m, testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c}))
		}
		return jepsen.Target{
			Name:     name,
			URL:      func(addr string) string { return scheme + "://" + addr + "," + m[1].Addr() + "," + m[2].Addr() },
			Upstream: m[0].Addr(),
			Server:   m[0],
			Clocks:   clocks,
			// A forward step on a majority of the masters ends a holder's
			// keys early on a quorum, and one on a single master does if
			// the holder was granted by exactly a quorum including it:
			// Redlock documents that its exclusion then rests on bounded
			// drift, whatever its ClockBound (see package redlock), so
			// those overlaps are expected, and fencing must make them
			// harmless. One master's step (clock-one-forward-5s) must
			// keep it available, and no step may lower a token.
			Forgets: []string{"clock-forward-5s", "clock-forward-10s", "clock-one-forward-5s"},
		}
	}
}

// TestJepsen runs every target at once: t.Run from a goroutine per
// target, not t.Parallel, which -parallel (GOMAXPROCS by default) would
// limit to two at a time although the workers mostly wait.
func TestJepsen(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, tg := range targets {
		wg.Go(func() { t.Run(tg.name, func(t *testing.T) { run(t, tg.make(t)) }) })
	}
}

// noSemaphores are the targets without semaphore runs, and why: most
// because their backend documents why it has no semaphores (its
// conformance suite checks that they fail cleanly).
var noSemaphores = map[string]string{
	"redis-lines":     "permits do not wait in lines (exclusive waiters only): redis's semaphore rows cover them",
	"redlock":         "Redlock offers no shared locks or semaphores (see package redlock)",
	"redlock-rueidis": "Redlock offers no shared locks or semaphores (see package redlock)",
	"redlock-valkey":  "Redlock offers no shared locks or semaphores (see package redlock)",
	"kube":            "a Lease has one holderIdentity, which client-go's leader election reads (see package kubelock)",
}

// TestJepsenSemaphore puts every target through the faults above with 4
// workers taking permits of a semaphore of 2: never more than 2 holders
// at once, a fence each, and progress after each fault.
func TestJepsenSemaphore(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, tg := range targets {
		if why := noSemaphores[tg.name]; why != "" {
			t.Logf("%s: no semaphore runs: %s", tg.name, why)
			continue
		}
		wg.Go(func() {
			t.Run(tg.name, func(t *testing.T) {
				target := tg.make(t)
				target.Name += " (semaphore of 2)"
				opts := options()
				opts.Workers, opts.Limit, opts.Nemeses = 4, 2, semaphoreNemeses
				for _, r := range jepsen.RunAll(t, target, opts) {
					report.Add(r)
				}
			})
		})
	}
}

// BenchmarkFailover measures, on every store whose workers are processes,
// how long after a kill -9 of the leader another process's Lead fn
// starts (5 rounds; run with -benchtime=1x). The TTL is the suite's 1 s;
// ZooKeeper and etcd wait for the dead leader's session instead.
func BenchmarkFailover(b *testing.B) {
	const rounds = 5
	ttl := time.Second
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			target := tg.make(b)
			if target.InProcess {
				b.Skip("memlock's store is one process's memory: no process to kill")
			}
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, jepsen.Failover(b, target, ttl, rounds)...)
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), "failover-p50-ms")
			b.ReportMetric(float64(ds[len(ds)-1].Milliseconds()), "failover-max-ms")
			b.ReportMetric(float64(max(ttl, target.DeadHolderLease).Milliseconds()), "lease-ms")
		})
	}
}
