package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestExitSharedOnRedlock: the adversary is a store whose backend has no
// shared locks or semaphores (Redlock). --shared or --limit there is a
// command line this store cannot serve: exit 64 with one line, as a usage
// error, not the undocumented 1; the command does not run.
func TestExitSharedOnRedlock(t *testing.T) {
	addrs := []string{testserver.StartRedis(t).Addr(), testserver.StartRedis(t).Addr(), testserver.StartRedis(t).Addr()}
	store := "redlock://" + strings.Join(addrs, ",")
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flags := range [][]string{{"-s"}, {"--limit", "2"}} {
		r := run(t, dlockCmd(t, append(append([]string{"run", "--store", store}, flags...), "job", "--", "touch", marker)...))
		wantCode(t, r, exitUsage, "run "+strings.Join(flags, " ")+" on Redlock")
		if !oneLine(r.stderr) || !strings.Contains(r.stderr, "no shared locks or semaphores") {
			t.Errorf("run %v on Redlock: stderr %q, want one line saying the store cannot", flags, r.stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("run %v on Redlock ran the command", flags)
		}
	}
}

// oneLine reports whether stderr is one line from dlock, which says
// "dlock: " once (a backend's wrapped sentinel used to repeat it:
// "redislock: connect: dlock: denied by the store").
func oneLine(stderr string) bool {
	return strings.HasPrefix(stderr, "dlock: ") && strings.Count(stderr, "dlock: ") == 1 &&
		strings.Count(stderr, "\n") == 1 && strings.HasSuffix(stderr, "\n")
}

// TestExitDemoWrongPassword: the adversary is a store that refuses the
// credentials, or is down. demo exits 77 (74) with one line naming the
// store, as run, status and observe do, not 1 with a worker's error; the
// password is not shown.
func TestExitDemoWrongPassword(t *testing.T) {
	store := passwordStore(t, "right-pw")
	wrong := strings.Replace(store, "right-pw", "wrong-pw", 1)
	r := run(t, dlockCmd(t, "demo", "--store", wrong, "--procs", "2", "--workers", "1", "--stock", "5"))
	wantCode(t, r, exitDenied, "demo with a wrong password")
	if !oneLine(r.stderr) || !strings.Contains(r.stderr, "denied") || strings.Contains(r.stderr, "wrong-pw") {
		t.Errorf("demo with a wrong password: stderr %q, want one line saying the store denied access, password hidden", r.stderr)
	}
	r = run(t, dlockCmd(t, "demo", "--store", "redis://"+closedPort(t), "--procs", "2"))
	wantCode(t, r, exitStore, "demo on a store that is down")
	if !oneLine(r.stderr) || !strings.Contains(r.stderr, "cannot reach store") {
		t.Errorf("demo on a store that is down: stderr %q, want one line saying so", r.stderr)
	}
}

// TestRunHomeNotCreated: the adversary is a system user whose home does
// not exist (Debian's /nonexistent), run as root: dlock created the home
// and its parents for the default store. It creates only below a home
// (or $XDG_STATE_HOME) that exists, and otherwise says to give a store.
func TestRunHomeNotCreated(t *testing.T) {
	tmp := t.TempDir()
	for _, env := range [][]string{
		{"HOME=" + filepath.Join(tmp, "nonexistent", "h"), "XDG_STATE_HOME="},
		{"HOME=" + tmp, "XDG_STATE_HOME=" + filepath.Join(tmp, "nonexistent", "state")},
	} {
		c := dlockCmd(t, "run", "x", "--", "true")
		c.Env = append(c.Env, env...)
		r := run(t, c)
		wantCode(t, r, exitUsage, strings.Join(env, " ")+" dlock run")
		for _, want := range []string{"--store", "DLOCK_STORE", "XDG_STATE_HOME", "does not exist"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v dlock run: stderr %q, want it to mention %s", env, r.stderr, want)
			}
		}
		if _, err := os.Stat(filepath.Join(tmp, "nonexistent")); err == nil {
			t.Fatalf("%v dlock run created %s", env, filepath.Join(tmp, "nonexistent"))
		}
	}
	c := dlockCmd(t, "run", "x", "--", "true")
	c.Env = append(c.Env, "HOME="+tmp, "XDG_STATE_HOME=")
	wantCode(t, run(t, c), 0, "run with an existing $HOME")
	if _, err := os.Stat(filepath.Join(tmp, ".local", "state", "dlock", "locks.db")); err != nil {
		t.Errorf("run with an existing $HOME: no default store below it: %v", err)
	}
}
