package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

func testDemo(t *testing.T, store []string) {
	t.Helper()
	r := run(t, dlockCmd(t, append([]string{"demo", "--procs", "3", "--workers", "6", "--stock", "150"}, store...)...))
	wantCode(t, r, 0, "demo")
	if f := demoFigures(t, r.stdout)[0]; f["oversold"] != 0 || f["sold"] != 150 || f["stock left"] != 0 {
		t.Errorf("demo under the lock: %v, want 150 sold, 0 left, 0 oversold\n%s", f, r.stdout)
	}
	if m := demoJain.FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("demo under the lock printed no Jain's index on its per worker line:\n%s", r.stdout)
	} else if j, err := strconv.ParseFloat(m[1], 64); err != nil || j < 1.0/3 || j > 1 {
		t.Errorf("demo under the lock: Jain's index %q, want a number between 1/3 (3 processes) and 1:\n%s", m[1], r.stdout)
	}

	r = run(t, dlockCmd(t, append([]string{"demo", "--no-lock", "--procs", "3", "--workers", "6", "--stock", "50"}, store...)...))
	wantCode(t, r, 0, "demo --no-lock")
	if f := demoFigures(t, r.stdout)[0]; f["oversold"] == 0 {
		t.Errorf("demo --no-lock oversold nothing with 18 buyers, want overselling:\n%s", r.stdout)
	}

	r = run(t, dlockCmd(t, append([]string{"demo", "--pause", "--procs", "2", "--workers", "4", "--stock", "40"}, store...)...))
	wantCode(t, r, 0, "demo --pause")
	phases := demoFigures(t, r.stdout)
	if len(phases) != 2 {
		t.Fatalf("demo --pause printed %d summaries, want 2 (plain, fenced):\n%s", len(phases), r.stdout)
	}
	if p := phases[0]; p["sold"]+p["stock left"] == 40 {
		t.Errorf("plain writes with stalled holders: %v, want the stale writes to corrupt the count:\n%s", p, r.stdout)
	}
	if f := phases[1]; f["oversold"] != 0 || f["sold"]+f["stock left"] != 40 {
		t.Errorf("fenced writes with stalled holders: %v, want exact:\n%s", f, r.stdout)
	}
}

// demoJain matches the fairness figure on the per worker line.
var demoJain = regexp.MustCompile(`(?m)^\s+per worker\s.*\(Jain's index ([0-9.]+)`)

func TestDemoOnRedis(t *testing.T) {
	testDemo(t, []string{"--store", redisStore(t)})
}

func TestDemoOnDefaultStore(t *testing.T) {
	testDemo(t, nil)
}

// childrenOf returns the pids of pid's child processes (forked by any of
// its threads).
func childrenOf(pid int) []int {
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var pids []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(data)) {
			if p, err := strconv.Atoi(w); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

func TestDemoCleansUpOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			c := dlockCmd(t, "demo", "--procs", "3", "--workers", "2", "--stock", "1000000")
			c.Env = append(c.Env, "TMPDIR="+tmp)
			done := start(t, c)
			var workers []int
			if !testkit.Poll(30*time.Second, func() bool { workers = childrenOf(c.Process.Pid); return len(workers) == 3 }) {
				t.Fatalf("demo started workers %v, want 3", workers)
			}
			time.Sleep(200 * time.Millisecond) // let them work
			c.Process.Signal(sig)
			r := <-done
			wantCode(t, r, 128+int(sig), "demo stopped by "+sig.String())
			for _, w := range workers {
				if !testkit.Poll(time.Second, func() bool { return gone(w) }) {
					t.Errorf("worker %d still running after demo exited", w)
					syscall.Kill(w, syscall.SIGKILL)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "dlock-demo-*")); len(left) > 0 {
				t.Errorf("demo left %v behind", left)
			}
		})
	}
}
