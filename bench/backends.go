package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Scenario 5: dlock's other backends, dlock only. Their servers are
// started by dlock's own test harness (internal/testserver), so this runs
// the conformance benchmarks (dlocktest.RunBenchmarks) with `go test` in
// the parent module and reads their figures.

// backendBench is one backend's figures, by metric unit.
type backendBench struct {
	name    string
	metrics map[string]map[string]float64 // sub-benchmark -> unit -> value
}

var otherBackendsPattern = `^Benchmark(Redis|MariaDB|Postgres|SQLite|ZooKeeper|Etcd|NATS)$`

var benchLine = regexp.MustCompile(`^Benchmark(\w+)/(\w+)-\d+\s+\d+\s+(.*)$`)

// otherBackends runs the benchmarks and parses them.
func otherBackends(benchtime string) ([]backendBench, error) {
	// Each backend's benchmarks are in its test module (X/tests).
	var out bytes.Buffer
	for _, dir := range []string{"redislock", "sqllock", "zklock", "etcdlock", "natslock"} {
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", otherBackendsPattern, "-benchtime", benchtime, ".")
		cmd.Dir = filepath.Join("..", dir, "tests")
		cmd.Env = append(os.Environ(), "DLOCK_REQUIRE_SERVERS=1")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go test -bench in %s: %v\n%s", cmd.Dir, err, tail(out.String(), 20))
		}
	}
	var (
		list  []backendBench
		index = map[string]int{}
	)
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		i, ok := index[m[1]]
		if !ok {
			i = len(list)
			index[m[1]] = i
			list = append(list, backendBench{name: m[1], metrics: map[string]map[string]float64{}})
		}
		units := map[string]float64{}
		f := strings.Fields(m[3])
		for j := 0; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				units[f[j+1]] = v
			}
		}
		list[i].metrics[m[2]] = units
	}
	return list, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeBackends renders scenario 5.
func writeBackends(p func(string, ...any), list []backendBench, benchtime string, err error) {
	p("## 5. dlock on every backend\n\n")
	p("dlock only, from its conformance benchmarks (`dlocktest.RunBenchmarks`, run here as `go test -run '^$' -bench '%s' -benchtime %s` in each backend's test module (`X/tests`), against the real servers its test harness starts on this host; SQLite is a file in a temporary directory). ", otherBackendsPattern, benchtime)
	p("These use a cancellable context, so every blocking call runs in a goroutine of the Locker's (the core honours the context even where the client library would not), which costs more than scenario 1's background context. A *round trip* is the backend's own ping: Redis PING, `SELECT 1`, ZooKeeper `exists /`, etcd `get`, NATS the KV bucket's status (`kv.Status`, one JetStream API request).\n\n")
	if err != nil {
		p("Not measured: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	p("| backend | uncontended acquire+release | round trips / op | ping | parallel distinct names (GOMAXPROCS goroutines) | handoff: release call to next holder, p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
	us := func(ns float64) string {
		if ns == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f µs", ns/1000)
	}
	for _, b := range list {
		u, par, h := b.metrics["Uncontended"], b.metrics["ParallelNames"], b.metrics["Handoff"]
		p("| %s | %s | %.1f | %s | %.0f ops/s | %s | %s |\n", b.name, us(u["ns/op"]), u["round-trips/op"], us(u["ping-ns"]), par["ops/s"],
			us(h["release-to-acquired-p50-ns"]), us(h["release-to-acquired-p99-ns"]))
	}
	p("\nEvery backend wakes the next waiter: PostgreSQL by LISTEN/NOTIFY, MySQL/MariaDB by the server's GET_LOCK queue on a named lock the holder keeps, SQLite (Linux) by inotify on a wake file next to the database, ZooKeeper and etcd by watches, NATS by a KV watch per name per Locker, Redis by the release script handing the lock over. Before those wake-ups, MySQL and SQLite waiters polled with a backoff up to 250 ms, so a handoff after a 300 ms hold took about 130 ms; section 7 measures that case with the waiter in another process.\n\n")
}
