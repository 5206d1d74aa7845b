package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leader is the command the lead tests run: under flock -n on dir/excl
// (a lock the kernel drops when the holder dies, however it dies), it
// logs "start ID FENCE" to dir/log and runs until SIGTERM; if another
// leader's command still holds dir/excl, it logs "overlap ID" instead and
// exits 99. (The outer shell traps SIGTERM, so that only the inner one
// decides the exit status. Its output goes nowhere: a command that
// outlived its dlock must not hold the test's pipe open.)
func leader(dir, id string) []string {
	script := `exec >/dev/null 2>&1; trap : TERM; flock -n -E 99 "$1/excl" sh -c '
		echo "start $2 $DLOCK_FENCE" >> "$1/log"
		trap "echo stop $2 >> \"$1/log\"; exit 0" TERM
		while :; do sleep 0.05; done' sh "$1" "$2"; [ $? != 99 ] || echo "overlap $2" >> "$1/log"`
	return []string{"sh", "-c", script, "sh", dir, id}
}

func TestLeadFailoverAfterKill9(t *testing.T) {
	store := sqliteStore(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	a := dlockCmd(t, append([]string{"lead", "--store", store, "--ttl", "1s", "chief", "--"}, leader(dir, "A")...)...)
	aDone := start(t, a)
	waitFile(t, log, "start A")
	b := dlockCmd(t, append([]string{"lead", "--store", store, "--ttl", "1s", "chief", "--"}, leader(dir, "B")...)...)
	bDone := start(t, b)
	time.Sleep(500 * time.Millisecond) // B campaigns
	if data, _ := os.ReadFile(log); strings.Contains(string(data), "B") {
		t.Fatalf("B's command ran while A led:\n%s", data)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := <-aDone; r.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("dlock lead A after kill -9: exit %d, want %d", r.code, 128+int(syscall.SIGKILL))
	}
	waitFile(t, log, " B") // "start B", or "overlap B"
	data, _ := os.ReadFile(log)
	if strings.Contains(string(data), "overlap") {
		t.Fatalf("B's command started while A's still ran:\n%s", data)
	}
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-bDone:
		wantCode(t, r, 0, "dlock lead B whose command exits 0 on the forwarded SIGTERM")
		if !strings.Contains(r.stderr, `leading "chief"`) {
			t.Errorf("B's stderr = %q, want it to say it leads", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock lead B still going 30s after SIGTERM")
	}
	waitFile(t, log, "stop B")
}

func TestLeadCampaignsAgainAfterLoss(t *testing.T) {
	store := sqliteStore(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	c := dlockCmd(t, append([]string{"lead", "--store", store, "--ttl", "1s", "--grace", "5s", "chief", "--"}, leader(dir, "A")...)...)
	done := start(t, c)
	waitFile(t, log, "start A")
	r := run(t, dlockCmd(t, "release", "--force", "--store", store, "chief"))
	wantCode(t, r, 0, "release --force")
	// Leadership lost: the command gets SIGTERM, then runs again once
	// lead leads again.
	waitFile(t, log, "stop A")
	deadline := time.Now().Add(30 * time.Second)
	var lines []string
	for {
		data, _ := os.ReadFile(log)
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "start A ") {
		t.Fatalf("log = %q, want start, stop, start", lines)
	}
	first, second := strings.Fields(lines[0])[2], strings.Fields(lines[2])[2]
	if len(second) < len(first) || len(second) == len(first) && second <= first {
		t.Errorf("DLOCK_FENCE %s after leading again, want above %s", second, first)
	}
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		wantCode(t, r, 0, "dlock lead whose command exits 0 on SIGTERM")
		for _, want := range []string{`lost leadership of "chief"`, "campaigning again"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr = %q, want it to mention %q", r.stderr, want)
			}
		}
		if n := strings.Count(r.stderr, `leading "chief"`); n != 2 {
			t.Errorf("stderr says %d times that it leads, want 2:\n%s", n, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlock lead still going 30s after SIGTERM")
	}
}

func TestLeadExitsWithCommand(t *testing.T) {
	store := sqliteStore(t)
	r := run(t, dlockCmd(t, "lead", "--store", store, "--quiet", "chief", "--", "sh", "-c", "exit 7"))
	wantCode(t, r, 7, "dlock lead of a command exiting 7")
	if r.stderr != "" {
		t.Errorf("dlock lead --quiet printed %q", r.stderr)
	}
	// Released: another leader takes over at once.
	r = run(t, dlockCmd(t, "run", "--try", "--store", store, "chief", "--", "true"))
	wantCode(t, r, 0, "run --try after dlock lead exited")
}
