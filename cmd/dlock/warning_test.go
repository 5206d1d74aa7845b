package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The adversary is a store that stops answering while the command runs
// (PostgreSQL paused): with --verbose, dlock says the renewal has no
// answer before it gives the lock up, and says so while the lease still
// runs; then it stops the command (exit 70) when the lease could end.
func TestRunVerboseWarnsBeforeLoss(t *testing.T) {
	pg := testserver.StartPostgres(t)
	store := "postgres://" + strings.TrimPrefix(pg.DSN(), "postgres://")
	testkit.MustOpen(t, store) // creates the store's table
	dir := t.TempDir()
	c := dlockCmd(t, "run", "-v", "--store", store, "--ttl", "3s", "--grace", "1s", "job", "--",
		"sh", "-c", `echo $$ > "$1/pid"; sleep 60`, "sh", dir)
	done := start(t, c)
	readPid(t, dir+"/pid")
	pg.Pause(t)
	defer pg.Resume(t)
	r := <-done
	wantCode(t, r, exitLost, "run whose store stopped answering")
	warned := regexp.MustCompile(`warning: the renewal of "job" has no answer after 500ms; the lock is held for (\S+) more unless one succeeds`)
	m := warned.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr has no warning before the loss:\n%s", r.stderr)
	}
	left, err := time.ParseDuration(m[1])
	if err != nil || left <= 0 {
		t.Errorf("the warning says %q is left, want a positive duration", m[1])
	}
	if w, lost := strings.Index(r.stderr, m[0]), strings.Index(r.stderr, "lost"); lost >= 0 && lost < w {
		t.Errorf("the loss was said before the warning:\n%s", r.stderr)
	}
	t.Logf("warned with %s of the lease left (TTL 3s)", m[1])
}
