package dlockgocron_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// ttl is the lease of the schedulers' locks: a dead holder is replaced
// within about this time.
const ttl = 2 * time.Second

// skewStep is how far behind each scheduler's clock is from the previous
// one's, in the Locker modes: 0, skewStep, 2*skewStep, all under
// dlockgocron.DefaultMinHold.
const skewStep = 150 * time.Millisecond

// stores runs f once for each store shared by processes: a SQLite file,
// and a Redis server.
func stores(t *testing.T, f func(t *testing.T, store string)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, "sqlite://"+filepath.Join(t.TempDir(), "locks.db"))
	})
	t.Run("redis", func(t *testing.T) {
		f(t, "redis://"+testserver.StartRedis(t).Addr())
	})
}

// scheduler is one scheduleWorker process.
type scheduler struct {
	p   *testworker.Process
	pid int
}

// startSchedulers starts three scheduleWorker processes in mode on store,
// appending to counter, and returns them once each scheduler runs.
func startSchedulers(t *testing.T, store, mode, counter string) []scheduler {
	t.Helper()
	ss := make([]scheduler, 3)
	for i := range ss {
		skew := time.Duration(0)
		if mode != "elector" {
			skew = time.Duration(i) * skewStep
		}
		ss[i].p = testworker.Start(t, "schedule", store, mode, counter, ttl.String(), skew.String())
	}
	for i := range ss {
		pid, err := strconv.Atoi(ss[i].p.Expect(t, "ready", 30*time.Second))
		if err != nil {
			t.Fatalf("scheduler %d: bad pid: %v", i, err)
		}
		ss[i].pid = pid
	}
	return ss
}

// kill kills the schedulers with SIGKILL: a graceful Shutdown would
// release a run's lock before its MinHold (see Unlock), which the tests do
// not mean to check.
func kill(t *testing.T, ss []scheduler) {
	t.Helper()
	for _, s := range ss {
		s.p.Kill(t)
	}
}

// run is one line of the counter file: a run of the tick (a Unix second)
// by the process pid.
type run struct {
	tick int64
	pid  int
}

// readRuns returns the runs in the counter file, in the order they ran.
func readRuns(t *testing.T, counter string) []run {
	t.Helper()
	f, err := os.Open(counter)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("open counter file: %v", err)
	}
	defer f.Close()
	var runs []run
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r run
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &r.tick, &r.pid); err != nil {
			t.Fatalf("counter file line %q: %v", sc.Text(), err)
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read counter file: %v", err)
	}
	return runs
}

// waitRuns polls the counter file until cond holds for its runs, and
// fails the test if it does not within timeout.
func waitRuns(t *testing.T, counter string, timeout time.Duration, what string, cond func([]run) bool) []run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		runs := readRuns(t, counter)
		if cond(runs) {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; runs (tick pid): %v", what, timeout, runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ticks returns the number of distinct ticks in runs.
func ticks(runs []run) int {
	seen := map[int64]bool{}
	for _, r := range runs {
		seen[r.tick] = true
	}
	return len(seen)
}

// checkOnce fails the test if a tick ran more than once, and returns the
// number of distinct ticks.
func checkOnce(t *testing.T, runs []run) int {
	t.Helper()
	by := map[int64][]int{}
	for _, r := range runs {
		by[r.tick] = append(by[r.tick], r.pid)
	}
	for tick, pids := range by {
		if tick == 0 {
			t.Errorf("a run without its scheduled time, by pids %v", pids)
		}
		if len(pids) > 1 {
			t.Errorf("tick %d ran %d times, by pids %v, want once", tick, len(pids), pids)
		}
	}
	return len(by)
}

func TestSchedulersRunEachTickOnce(t *testing.T) {
	for _, mode := range []string{"elector", "locker"} {
		t.Run(mode, func(t *testing.T) {
			stores(t, func(t *testing.T, store string) {
				counter := filepath.Join(t.TempDir(), "counter")
				ss := startSchedulers(t, store, mode, counter)
				start := time.Now()
				waitRuns(t, counter, 30*time.Second, "5 ticks run", func(r []run) bool { return ticks(r) >= 5 })
				took := time.Since(start)
				kill(t, ss)
				runs := readRuns(t, counter)
				if n := checkOnce(t, runs); n < 3 {
					t.Errorf("%d ticks ran, want at least 3", n)
				}
				t.Logf("%d runs in %v (tick pid): %v", len(runs), took.Round(time.Millisecond), runs)
			})
		})
	}
}

// TestLockerWithoutMinHoldRunsTicksTwice shows what MinHold is for: with
// it off, a scheduler whose clock is behind by less than the default
// MinHold runs ticks a faster scheduler has already run.
func TestLockerWithoutMinHoldRunsTicksTwice(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "counter")
	ss := startSchedulers(t, "sqlite://"+filepath.Join(t.TempDir(), "locks.db"), "locker-nohold", counter)
	waitRuns(t, counter, 30*time.Second, "tick run twice", func(r []run) bool { return ticks(r) < len(r) })
	kill(t, ss)
}

func TestKilledRunnerIsReplaced(t *testing.T) {
	for _, mode := range []string{"elector", "locker"} {
		t.Run(mode, func(t *testing.T) {
			stores(t, func(t *testing.T, store string) {
				counter := filepath.Join(t.TempDir(), "counter")
				ss := startSchedulers(t, store, mode, counter)
				runs := waitRuns(t, counter, 30*time.Second, "2 runs", func(r []run) bool { return len(r) >= 2 })
				leader := runs[len(runs)-1].pid
				var others []scheduler
				for _, s := range ss {
					if s.pid == leader {
						s.p.Kill(t)
					} else {
						others = append(others, s)
					}
				}
				if len(others) != 2 {
					t.Fatalf("the last run's pid %d is none of the schedulers' %v", leader, ss)
				}
				killed := time.Now()
				// A run by another process of a tick after the kill.
				bound := ttl + 10*time.Second
				runs = waitRuns(t, counter, bound, "run by another process after the kill", func(r []run) bool {
					for _, x := range r {
						if x.pid != leader && time.Unix(x.tick, 0).After(killed) {
							return true
						}
					}
					return false
				})
				var first time.Time
				for _, x := range runs {
					if x.pid != leader && time.Unix(x.tick, 0).After(killed) {
						first = time.Unix(x.tick, 0)
						break
					}
				}
				kill(t, others)
				runs = readRuns(t, counter)
				checkOnce(t, runs)
				t.Logf("killed %d; first tick run by another process %v after the kill; runs (tick pid): %v",
					leader, first.Sub(killed).Round(time.Millisecond), runs)
			})
		})
	}
}
