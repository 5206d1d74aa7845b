package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// holdUntilGo is a command that creates dir/ID, then runs until dir/go
// exists.
func holdUntilGo(dir, id string) []string {
	return []string{"sh", "-c", `touch "$1/$2"; while [ ! -e "$1/go" ]; do sleep 0.05; done`, "sh", dir, id}
}

// startHolders starts a "dlock run" with flags for each id, running
// holdUntilGo, and waits until every command runs: so they hold the name
// together.
func startHolders(t *testing.T, store, dir, name string, flags []string, ids ...string) []<-chan result {
	t.Helper()
	var done []<-chan result
	for _, id := range ids {
		args := append(append([]string{"run", "--store", store}, flags...), name, "--")
		done = append(done, start(t, dlockCmd(t, append(args, holdUntilGo(dir, id)...)...)))
	}
	for _, id := range ids {
		waitExists(t, filepath.Join(dir, id))
	}
	return done
}

// waitExists waits until path exists.
func waitExists(t *testing.T, path string) {
	t.Helper()
	if !testkit.Poll(30*time.Second, func() bool { _, err := os.Stat(path); return err == nil }) {
		t.Fatalf("%s never appeared", path)
	}
}

// finish lets the holders' commands end, and checks that each run exited 0.
func finish(t *testing.T, dir string, done []<-chan result) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, ch := range done {
		select {
		case r := <-ch:
			wantCode(t, r, 0, "holder "+string(rune('A'+i)))
		case <-time.After(30 * time.Second):
			t.Fatalf("holder %d still running 30s after its command was told to end", i)
		}
	}
}

func TestRunShared(t *testing.T) {
	store := sqliteStore(t)
	dir := t.TempDir()
	done := startHolders(t, store, dir, "catalog", []string{"--shared"}, "A", "B")
	// -s, as flock's, is --shared.
	r := run(t, dlockCmd(t, "run", "--store", store, "-s", "--try", "catalog", "--", "true"))
	wantCode(t, r, 0, "run -s --try beside two shared holders")
	r = run(t, dlockCmd(t, "run", "--store", store, "--try", "catalog", "--", "true"))
	wantCode(t, r, exitNotAcquired, "run --try (exclusive) beside two shared holders")
	if !strings.Contains(r.stderr, "1 other(s) (shared)") {
		t.Errorf("stderr = %q, want it to name the shared holders", r.stderr)
	}
	r = run(t, dlockCmd(t, "status", "--store", store, "catalog"))
	wantCode(t, r, 0, "status")
	if n := strings.Count(r.stdout, `"catalog"`); n != 2 || !strings.Contains(r.stdout, "MODE") || strings.Count(r.stdout, " shared ") != 2 {
		t.Errorf("status printed\n%s\nwant a MODE column and two shared rows for \"catalog\"", r.stdout)
	}
	list := statusJSON(t, store, "catalog")
	if len(list) != 2 {
		t.Fatalf("status --json lists %d holders, want 2: %v", len(list), list)
	}
	for _, e := range list {
		if e["shared"] != true || e["limit"] != float64(0) {
			t.Errorf("status --json entry %v, want shared true and limit 0", e)
		}
	}
	finish(t, dir, done)
}

func TestRunLimit(t *testing.T) {
	store := sqliteStore(t)
	dir := t.TempDir()
	done := startHolders(t, store, dir, "exports", []string{"--limit", "2"}, "A", "B")
	r := run(t, dlockCmd(t, "run", "--store", store, "--limit", "2", "--try", "exports", "--", "true"))
	wantCode(t, r, exitNotAcquired, "a third run --limit 2 --try")
	r = run(t, dlockCmd(t, "status", "--store", store))
	wantCode(t, r, 0, "status")
	if n := strings.Count(r.stdout, "permit 2/2"); n != 2 {
		t.Errorf("status printed\n%s\nwant two rows \"permit 2/2\"", r.stdout)
	}
	for _, e := range statusJSON(t, store, "exports") {
		if e["shared"] != false || e["limit"] != float64(2) {
			t.Errorf("status --json entry %v, want shared false and limit 2", e)
		}
	}
	// The name is a semaphore of 2: another limit, or a lock, is a data
	// error, said in one line.
	for _, flags := range [][]string{{"--limit", "3"}, {}, {"--shared"}} {
		args := append(append([]string{"run", "--store", store, "--try"}, flags...), "exports", "--", "true")
		r := run(t, dlockCmd(t, args...))
		wantCode(t, r, exitMode, strings.Join(args, " "))
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || !strings.Contains(r.stderr, "another mode") {
			t.Errorf("dlock %v: stderr = %q, want one line saying the name is held in another mode", flags, r.stderr)
		}
	}
	finish(t, dir, done)
}

func TestRunSharedStopsCommandWhenLost(t *testing.T) {
	store := sqliteStore(t)
	dir := t.TempDir()
	c := dlockCmd(t, append([]string{"run", "--store", store, "--ttl", "1s", "--shared", "doomed", "--"}, holdUntilGo(dir, "A")...)...)
	done := start(t, c)
	waitExists(t, filepath.Join(dir, "A"))
	wantCode(t, run(t, dlockCmd(t, "release", "--force", "--store", store, "doomed")), 0, "release --force")
	select {
	case r := <-done:
		wantCode(t, r, exitLost, "run --shared whose hold was force-released")
	case <-time.After(30 * time.Second):
		t.Fatal("run --shared still going 30s after its hold was force-released")
	}
}
