package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// heldMetadata runs dlock run with flags on store, holding "job" while
// its command runs "dlock status --json job" on the same store, and
// returns the metadata that status showed of the holder. The command line
// carries two passwords, as pg_dump's and a --url= flag's would.
func heldMetadata(t *testing.T, store string, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "status.json")
	args := append(append([]string{"run", "--store", store}, flags...), "job", "--",
		"sh", "-c", `"$0" status --store "$1" --json job > "$2"`, os.Args[0], store, out,
		"postgres://u:hunter2@db/x", "--url=mysql://v:hunter3@h:3306/d")
	wantCode(t, run(t, dlockCmd(t, args...)), 0, "run of dlock status")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var list []statusEntry
	if err := json.Unmarshal(data, &list); err != nil || len(list) != 1 || !list[0].Held {
		t.Fatalf("status --json while run held job = %s (%v), want one holder", data, err)
	}
	return list[0].Metadata
}

// TestRunMetadataKeepsCommandPrivate: the adversary is anyone who can read
// the store (status, observe, a conflict line on another host), who saw
// the whole command line, passwords included. By default the store holds
// host and pid only; --record-command adds the command, passwords
// redacted.
func TestRunMetadataKeepsCommandPrivate(t *testing.T) {
	store := sqliteStore(t)
	host, _ := os.Hostname()
	meta := heldMetadata(t, store)
	if !strings.HasPrefix(meta, "host="+host+" pid=") || strings.Contains(meta, "cmd=") || strings.Contains(meta, "hunter") {
		t.Errorf("metadata of a default run = %q, want host and pid only", meta)
	}
	meta = heldMetadata(t, store, "--record-command")
	for _, want := range []string{"cmd=sh -c", "postgres://u:xxxxx@db/x", "--url=mysql://v:xxxxx@h:3306/d"} {
		if !strings.Contains(meta, want) {
			t.Errorf("metadata of run --record-command = %q, want it to hold %q", meta, want)
		}
	}
	if strings.Contains(meta, "hunter") {
		t.Errorf("metadata of run --record-command = %q, which shows a password", meta)
	}
}

// forged is a holder's metadata written to take over an administrator's
// terminal: it clears the screen, turns the text red, and forges a row of
// the status table on a line of its own; \u009b is the one-byte CSI that
// some terminals obey too.
const forged = "sleep 2 #\x1b[2J\x1b[31m\nFAKE LINE \u009b31m"

// TestHolderMetadataEscaped: the adversary is a holder (any program that
// can take a lock) whose metadata carries terminal control sequences and
// a newline. status, status --json, observe and the conflict line of run
// show them escaped: no ESC or CSI reaches the terminal, and no line
// starts with the forged text.
func TestHolderMetadataEscaped(t *testing.T) {
	store := sqliteStore(t)
	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "esc", dlock.WithMetadata(forged))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	term := startTerminal(t, "status", "--store", store)
	r := term.wait(t)
	wantCode(t, r, 0, "status on a pty")
	wantEscaped(t, "status on a pty", r.stdout)
	if !strings.Contains(r.stdout, `\x1b[2J`) {
		t.Errorf("status on a pty printed %q, want the metadata shown escaped", r.stdout)
	}
	r = run(t, dlockCmd(t, "status", "--store", store, "--json"))
	wantCode(t, r, 0, "status --json")
	wantEscaped(t, "status --json", r.stdout)
	if l := statusJSON(t, store, "esc"); len(l) != 1 || l[0]["metadata"] != forged {
		t.Errorf("status --json = %v, want the metadata intact once decoded", l)
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "--try", "esc", "--", "true"))
	wantCode(t, r, exitNotAcquired, "run --try on the held lock")
	wantEscaped(t, "run's conflict line", r.stderr)
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || !strings.Contains(r.stderr, "held by") {
		t.Errorf("run --try printed %q, want one line naming the holder", r.stderr)
	}
	lines, signal, done := startObserve(t, "observe", "--store", store, "esc")
	line := nextLine(t, lines, "the holder")
	signal(syscall.SIGINT)
	waitExit(t, done, "observe after SIGINT")
	wantEscaped(t, "observe", line)
}

// wantEscaped fails the test if out holds a control character a terminal
// obeys (ESC, CSI) or a line that starts with the forged text.
func wantEscaped(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\u009b") {
		t.Errorf("%s printed a terminal control character: %q", what, out)
	}
	for l := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimLeft(l, "\r"), "FAKE LINE") {
			t.Errorf("%s printed a forged line: %q", what, out)
		}
	}
}
