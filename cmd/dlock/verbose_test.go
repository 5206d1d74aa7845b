package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// passwordStore starts a Redis server that requires password and returns
// its store URL, password included.
func passwordStore(t *testing.T, password string) string {
	t.Helper()
	srv := testserver.StartRedis(t)
	if err := srv.Client(t).ConfigSet(t.Context(), "requirepass", password).Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v", err)
	}
	return "redis://:" + password + "@" + srv.Addr()
}

// wantLogLine fails the test unless stderr has a slog text line at level
// with message msg.
func wantLogLine(t *testing.T, stderr, level, msg string) {
	t.Helper()
	want := "level=" + level + ` msg="` + msg + `"`
	for l := range strings.Lines(stderr) {
		if strings.HasPrefix(l, "time=") && strings.Contains(l, want) {
			return
		}
	}
	t.Errorf("stderr has no line with %s:\n%s", want, stderr)
}

func TestRunVerboseLogs(t *testing.T) {
	const password = "s3cret-pw"
	store := passwordStore(t, password)
	r := run(t, dlockCmd(t, "run", "--verbose", "--store", store, "job", "--", "true"))
	wantCode(t, r, 0, "run --verbose")
	wantLogLine(t, r.stderr, "DEBUG", "dlock: acquire")
	wantLogLine(t, r.stderr, "DEBUG", "dlock: released")
	if strings.Contains(r.stderr, password) {
		t.Errorf("run --verbose printed the store's password:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout, "dlock:") {
		t.Errorf("run --verbose logged to stdout:\n%s", r.stdout)
	}

	// A lock lost under the command: a WARN line.
	dir := t.TempDir()
	c := dlockCmd(t, "run", "--verbose", "--store", store, "--ttl", "1s", "--grace", "200ms", "doomed", "--",
		"sh", "-c", `echo started >> "$1"; while true; do sleep 0.05; done`, "sh", filepath.Join(dir, "log"))
	done := start(t, c)
	waitFile(t, filepath.Join(dir, "log"), "started")
	wantCode(t, run(t, dlockCmd(t, "release", "--force", "--store", store, "doomed")), 0, "release --force")
	select {
	case r := <-done:
		wantCode(t, r, exitLost, "run --verbose whose lock was force-released")
		wantLogLine(t, r.stderr, "WARN", "dlock: lock lost")
		if strings.Contains(r.stderr, password) {
			t.Errorf("run --verbose printed the store's password:\n%s", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still going 30s after its lock was force-released")
	}
}
