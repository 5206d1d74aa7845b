package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// redisStore starts a Redis server and returns its store URL.
func redisStore(t *testing.T) string {
	t.Helper()
	return "redis://" + testserver.StartRedis(t).Addr()
}

func TestRunNeverOverlaps(t *testing.T) {
	store := redisStore(t)
	marks := filepath.Join(t.TempDir(), "marks")
	script := `echo "start $DLOCK_FENCE" >> "$1"; sleep 0.2; echo "end $DLOCK_FENCE" >> "$1"`
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Go(func() {
			for range 3 {
				r := run(t, dlockCmd(t, "run", "--store", store, "critical", "--", "sh", "-c", script, "sh", marks))
				if r.code != 0 {
					t.Errorf("run %d: exit %d, stderr %s", p, r.code, r.stderr)
				}
			}
		})
	}
	wg.Wait()
	data, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 18 {
		t.Fatalf("%d marks, want 18:\n%s", len(lines), data)
	}
	var lastFence string
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if start[0] != "start" || end[0] != "end" || start[1] != end[1] {
			t.Fatalf("marks %d-%d = %q, %q: two commands overlapped\n%s", i, i+1, lines[i], lines[i+1], data)
		}
		if start[1] <= lastFence && len(start[1]) == len(lastFence) {
			t.Fatalf("DLOCK_FENCE %s after %s, want increasing", start[1], lastFence)
		}
		lastFence = start[1]
	}
}

func TestRunOnDefaultStore(t *testing.T) {
	c := dlockCmd(t, "run", "--try", "job", "--", "sh", "-c", `echo "$DLOCK_FENCE"`)
	r := run(t, c)
	wantCode(t, r, 0, "run on the default store")
	var state string
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, "XDG_STATE_HOME="); ok {
			state = v
		}
	}
	if _, err := os.Stat(filepath.Join(state, "dlock", "locks.db")); err != nil {
		t.Errorf("no SQLite store in $XDG_STATE_HOME/dlock: %v", err)
	}
	if strings.TrimSpace(r.stdout) == "" {
		t.Errorf("the command saw no DLOCK_FENCE")
	}
}

func TestRunTryWhileHeld(t *testing.T) {
	store := redisStore(t)
	l := testkit.MustOpen(t, store)
	k, err := l.TryAcquire(t.Context(), "busy", dlock.WithMetadata("host=elsewhere pid=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	marker := filepath.Join(t.TempDir(), "ran")
	r := run(t, dlockCmd(t, "run", "--store", store, "--try", "busy", "--", "touch", marker))
	wantCode(t, r, exitNotAcquired, "run --try on a held lock")
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || !strings.Contains(r.stderr, "host=elsewhere") {
		t.Errorf("stderr = %q, want one line naming the holder", r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran without the lock")
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "--wait", "300ms", "busy", "--", "touch", marker))
	wantCode(t, r, exitNotAcquired, "run --wait 300ms on a held lock")
	if r.took > 300*time.Millisecond+5*time.Second {
		t.Errorf("run --wait 300ms took %v", r.took)
	}
}

func TestRunPassesStatusAndEnvironment(t *testing.T) {
	store := redisStore(t)
	r := run(t, dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", `echo "$DLOCK_NAME $DLOCK_FENCE"; exit 7`))
	wantCode(t, r, 7, "run of a command exiting 7")
	f := strings.Fields(r.stdout)
	if len(f) != 2 || f[0] != "job" || len(f[1]) < 1 || f[1] == "0" {
		t.Errorf("child saw DLOCK_NAME DLOCK_FENCE = %q, want \"job <token>\"", r.stdout)
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "job", "--", "/nonexistent/cmd"))
	wantCode(t, r, 127, "run of a missing command")
	// The lock was released after each run.
	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "job")
	if err != nil {
		t.Fatalf("TryAcquire after run = %v, want the lock released", err)
	}
	k.Release(t.Context())
}

func TestRunStopsCommandWhenLockLost(t *testing.T) {
	store := redisStore(t)
	dir := t.TempDir()
	// The command ignores SIGTERM, so only SIGKILL after the grace ends it.
	script := `trap 'echo term >> "$1"' TERM; echo started >> "$1"; while true; do sleep 0.05; done`
	c := dlockCmd(t, "run", "--store", store, "--ttl", "1s", "--grace", "500ms", "doomed", "--", "sh", "-c", script, "sh", filepath.Join(dir, "log"))
	done := start(t, c)
	waitFile(t, filepath.Join(dir, "log"), "started")
	forced := run(t, dlockCmd(t, "release", "--force", "--store", store, "doomed"))
	wantCode(t, forced, 0, "release --force")
	if !strings.Contains(forced.stdout, "released") {
		t.Errorf("release --force printed %q", forced.stdout)
	}
	released := time.Now()
	select {
	case r := <-done:
		wantCode(t, r, exitLost, "run whose lock was force-released")
		// Lost within one renewal (TTL/3), then 500ms grace, plus slack.
		if d := time.Since(released); d > time.Second+500*time.Millisecond+5*time.Second {
			t.Errorf("run stopped %v after the lock was released", d)
		}
		if !strings.Contains(r.stderr, "lost") {
			t.Errorf("stderr %q does not report the loss", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still going 30s after its lock was force-released")
	}
	data, _ := os.ReadFile(filepath.Join(dir, "log"))
	if !strings.Contains(string(data), "term") {
		t.Errorf("the command never got SIGTERM; log:\n%s", data)
	}
}

func TestRunSignalWhileWaiting(t *testing.T) {
	store := redisStore(t)
	l := testkit.MustOpen(t, store)
	k, err := l.TryAcquire(t.Context(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(context.Background())
	c := dlockCmd(t, "run", "--store", store, "held", "--", "true")
	done := start(t, c)
	testkit.Eventually(t, "dlock run queued for held", func() bool {
		n, err := l.Waiters(t.Context(), "held")
		return err == nil && n == 1
	})
	signalled := time.Now()
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		wantCode(t, r, 128+int(syscall.SIGTERM), "run interrupted while waiting")
		if !strings.Contains(r.stderr, "interrupted by SIGTERM while waiting") {
			t.Errorf("run interrupted while waiting: stderr %q, want it to name SIGTERM", r.stderr)
		}
		if d := time.Since(signalled); d > 5*time.Second {
			t.Errorf("run exited %v after SIGTERM, want promptly", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still waiting 30s after SIGTERM")
	}
}

func TestStatus(t *testing.T) {
	store := redisStore(t)
	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "inspected", dlock.WithMetadata("host=h1 pid=42"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	r := run(t, dlockCmd(t, "status", "--store", store, "--json", "inspected", "free"))
	wantCode(t, r, 0, "status --json")
	for _, want := range []string{`"name": "inspected"`, `"held": true`, fmt.Sprintf(`"fence": "%d"`, k.Fence()), `"metadata": "host=h1 pid=42"`, `"name": "free"`, `"held": false`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status --json lacks %s:\n%s", want, r.stdout)
		}
	}
	r = run(t, dlockCmd(t, "status", "--store", store))
	wantCode(t, r, 0, "status")
	if !strings.Contains(r.stdout, `"inspected"`) || !strings.Contains(r.stdout, "host=h1") {
		t.Errorf("status lacks the held lock:\n%s", r.stdout)
	}
}

// waitFile waits until path contains want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%s contains %q", path, want), func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), want)
	})
}

func TestRunForwardsSignals(t *testing.T) {
	store := redisStore(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// The command reports SIGTERM and exits 3.
	script := `trap 'echo term >> "$1"; exit 3' TERM; echo started >> "$1"; while true; do sleep 0.05; done`
	c := dlockCmd(t, "run", "--store", store, "forwarded", "--", "sh", "-c", script, "sh", log)
	done := start(t, c)
	waitFile(t, log, "started")
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		wantCode(t, r, 3, "run whose command exits 3 on the forwarded SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("run still going 30s after SIGTERM")
	}
	waitFile(t, log, "term")
	// The lock was released when the command exited.
	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "forwarded")
	if err != nil {
		t.Fatalf("TryAcquire after run = %v, want the lock released", err)
	}
	k.Release(t.Context())
}

// TestRunNonUTF8Argv: a command line that is not valid UTF-8 (argv is
// bytes) still runs; its metadata is made valid, not refused as a mode
// clash or bad input.
func TestRunNonUTF8Argv(t *testing.T) {
	r := run(t, dlockCmd(t, "run", "--store", "mem://", "x", "--", "sh", "-c", "exit 3", "\xff"))
	wantCode(t, r, 3, "run with a non-UTF-8 argument")
}
