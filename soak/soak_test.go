package soak_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite"

	_ "github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testworker"
	_ "github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/soak"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/sqllock/mysql"
	_ "github.com/dlock-go/dlock/sqllock/postgres"
	_ "github.com/dlock-go/dlock/zklock"
)

// workers is the number of worker processes, one Locker each.
const workers = 4

var report soak.Report

func TestMain(m *testing.M) {
	// The MySQL driver logs broken connections to stderr, which the
	// runner prints for a failed test: the soak's kill -9 makes hundreds.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	testworker.Run(map[string]testworker.Func{"soak": soak.Worker})
	report.Command = command()
	code := m.Run()
	if path := os.Getenv("DLOCK_SOAK_REPORT"); path != "" && len(report.Runs) > 0 {
		if err := report.WriteFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "soak report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// command describes the run's settings for the report's header.
func command() string {
	var env []string
	for _, k := range []string{"DLOCK_SOAK_DURATION", "DLOCK_SOAK_BACKENDS", "DLOCK_SOAK_ETCD_RETENTION"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return strings.TrimSpace(strings.Join(env, " ") + " go test -race -run TestSoak ./soak/")
}

// settings returns the run's length, sample period and warm-up: the
// short mode's (15 s, 1 s, 3 s) unless DLOCK_SOAK_DURATION asks for a
// longer run (sampled every 10 s, or 24 times if that is more often;
// warm-up max(1 min, 20 %), at most 25 %).
func settings(t *testing.T) (d, period, warmup time.Duration, short bool) {
	t.Helper()
	s := os.Getenv("DLOCK_SOAK_DURATION")
	if s == "" {
		return 15 * time.Second, time.Second, 3 * time.Second, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Minute {
		t.Fatalf("DLOCK_SOAK_DURATION=%q: want a duration of at least 1m", s)
	}
	// The warm-up is capped at a quarter of the run so that each phase
	// (before and after the restart) keeps samples to fit.
	// A run shorter than 4 minutes is sampled more often than every 10 s
	// so that each phase still has samples to fit.
	return d, min(10*time.Second, d/24), min(max(time.Minute, d/5), d/4), false
}

// TestSoak runs the workload on every backend, one at a time, and fails
// on what a long run under ordinary load must not show: figures that
// grow steadily (leaked watches, goroutines, memory, connections, server
// state), state left on the server beyond what each backend documents,
// connections refused at the server's default limits, throughput that
// decays, and broken exclusion or locks lost without a fault.
func TestSoak(t *testing.T) {
	sel := os.Getenv("DLOCK_SOAK_BACKENDS")
	for _, b := range backends {
		if sel != "" && !slices.Contains(strings.Split(sel, ","), b.name) {
			continue
		}
		t.Run(b.name, func(t *testing.T) { soakOne(t, b) })
	}
}

func soakOne(t *testing.T, b backend) {
	d, period, warmup, short := settings(t)
	dir := t.TempDir()
	tg := b.start(t, dir, d)
	r := &soak.Run{Backend: b.name, Duration: d, Period: period, Warmup: warmup, Short: short,
		Fault: tg.fault, ForgetsOnRestart: tg.forgets, Workers: workers, PeakBounds: tg.peak, PeakDocs: tg.peakDoc}
	run(t, tg, r, dir)
	if os.Getenv("DLOCK_SOAK_REPORT") != "" {
		report.Runs = append(report.Runs, r)
	}
	for _, v := range r.Checks() {
		switch {
		case v.Pass:
			t.Logf("%s: %s: pass: %s", b.name, v.Check, v.Detail)
		case v.Info:
			t.Logf("%s: %s: reported, not judged in a short run: %s", b.name, v.Check, v.Detail)
		default:
			t.Errorf("soak %s: %s: FAIL: %s", b.name, v.Check, v.Detail)
		}
	}
	s, _ := json.Marshal(r.Summary())
	t.Logf("summary: %s", s)
}

// fleet is the running workers and their sample files.
type fleet struct {
	t      *testing.T
	url    string
	table  string
	dir    string
	period time.Duration
	procs  [workers]*testworker.Process
	files  [workers][]string // every generation's sample file
}

func (f *fleet) start(w int) {
	path := filepath.Join(f.dir, fmt.Sprintf("w%d.g%d.jsonl", w, len(f.files[w])))
	f.files[w] = append(f.files[w], path)
	f.procs[w] = testworker.Start(f.t, "soak", f.url, f.table, strconv.Itoa(w), f.period.String(), path)
}

// last returns the last snapshot in path.
func last(path string) (soak.Snapshot, bool) {
	var s soak.Snapshot
	fh, err := os.Open(path)
	if err != nil {
		return s, false
	}
	defer fh.Close()
	ok := false
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		// The last line may be one the worker is writing now (a reader
		// can see part of a write): keep the last whole snapshot, or the
		// worker's counts would drop out of this sample.
		var next soak.Snapshot
		if json.Unmarshal(sc.Bytes(), &next) == nil {
			s, ok = next, true
		}
	}
	return s, ok
}

// totals sums the last snapshot of every worker process.
func (f *fleet) totals() soak.Snapshot {
	tot := soak.Snapshot{Errors: map[string]int64{}, Messages: map[string]string{}}
	for w := range workers {
		for _, path := range f.files[w] {
			s, ok := last(path)
			if !ok {
				continue
			}
			tot.Acquired += s.Acquired
			tot.Lost += s.Lost
			tot.Violations += s.Violations
			for k, v := range s.Errors {
				tot.Errors[k] += v
				if _, ok := tot.Messages[k]; !ok {
					tot.Messages[k] = s.Messages[k]
				}
			}
		}
	}
	return tot
}
