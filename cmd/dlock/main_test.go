package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the dlock command: with DLOCK_TEST_AS_CLI set
// it runs main, so tests run real dlock processes (and demo's worker
// processes re-execute it the same way).
func TestMain(m *testing.M) {
	if os.Getenv("DLOCK_TEST_AS_CLI") == "1" {
		os.Exit(execute(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// dlockCmd returns a dlock process with args, not started. Its state
// directory is private to the test.
func dlockCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), "DLOCK_TEST_AS_CLI=1", "XDG_STATE_HOME="+t.TempDir(), "DLOCK_STORE=")
	return c
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs a dlock process to completion.
func run(t *testing.T, c *exec.Cmd) result {
	t.Helper()
	return <-start(t, c)
}

// start starts a dlock process; its result arrives when it exits (it is
// killed after a minute).
func start(t *testing.T, c *exec.Cmd) <-chan result {
	t.Helper()
	var out, errb bytes.Buffer
	c.Stdout = &out
	if c.Stderr == nil { // else the caller's (a file it reads as it goes)
		c.Stderr = &errb
	}
	began := time.Now()
	if err := c.Start(); err != nil {
		t.Fatalf("start dlock: %v", err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	ch := make(chan result, 1)
	go func() { // exits when the process does
		timer := time.AfterFunc(time.Minute, func() { c.Process.Kill() })
		err := c.Wait()
		timer.Stop()
		ch <- exitResult(err, out.String(), errb.String(), time.Since(began))
	}()
	return ch
}

func exitResult(err error, stdout, stderr string, took time.Duration) result {
	r := result{stdout: stdout, stderr: stderr, took: took}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		r.code, r.stderr = -1, err.Error()
	}
	return r
}

func wantCode(t *testing.T, r result, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
}

var demoLine = regexp.MustCompile(`(?m)^\s+(sold|stock left|oversold)\s+(\d+)`)

// demoFigures returns the sold, stock left and oversold figures of each
// phase a demo printed.
func demoFigures(t *testing.T, out string) []map[string]int {
	t.Helper()
	var phases []map[string]int
	for _, m := range demoLine.FindAllStringSubmatch(out, -1) {
		if m[1] == "sold" {
			phases = append(phases, map[string]int{})
		}
		n, _ := strconv.Atoi(m[2])
		phases[len(phases)-1][m[1]] = n
	}
	if len(phases) == 0 {
		t.Fatalf("no summary in demo output:\n%s", out)
	}
	return phases
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", "name"}, exitUsage, "no COMMAND"},
		{[]string{"run", "name", "--"}, exitUsage, "no COMMAND"},
		{[]string{"run", "--try", "--wait", "1s", "n", "--", "true"}, exitUsage, "exclude each other"},
		{[]string{"run", "--bogus", "n", "--", "true"}, exitUsage, "unknown flag"},
		{[]string{"release", "name"}, exitUsage, "without --force"},
		{[]string{"run", "--shared", "--limit", "2", "n", "--", "true"}, exitUsage, "exclude each other"},
		{[]string{"run", "-s", "--limit", "1", "n", "--", "true"}, exitUsage, "exclude each other"},
		{[]string{"run", "--limit", "0", "n", "--", "true"}, exitUsage, "at least 1 permit"},
		{[]string{"run", "--limit", "-2", "n", "--", "true"}, exitUsage, "at least 1 permit"},
		{[]string{"lead", "n"}, exitUsage, "no COMMAND"},
		{[]string{"lead", "--try", "n", "--", "true"}, exitUsage, "unknown flag"},
		{[]string{"observe"}, exitUsage, "observe: accepts 1 arg(s), received 0 (usage: dlock observe [flags] NAME)"},
		{[]string{"observe", "a", "b"}, exitUsage, "observe: accepts 1 arg(s), received 2 (usage: dlock observe [flags] NAME)"},
		{[]string{"release", "--force"}, exitUsage, "release: accepts 1 arg(s), received 0 (usage: dlock release --force NAME"},
		{[]string{"release", "--force", "a", "b"}, exitUsage, "release: accepts 1 arg(s), received 2 (usage: dlock release --force NAME"},
		{[]string{"demo", "x"}, exitUsage, "demo: unknown command \"x\" for \"dlock demo\" (usage: dlock demo [flags])"},
		{[]string{"observe", ""}, exitUsage, "bad lock name \"\": empty lock name\n"}, // not "...: dlock"
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"status", "--store", "nosuch://x"}, exitUsage, `unknown scheme "nosuch"`},
		{[]string{"status", "--store", "redis://u:secret@127.0.0.1:1"}, exitStore, "xxxxx"},
	} {
		r := run(t, dlockCmd(t, tc.args...))
		wantCode(t, r, tc.code, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("dlock %v: stderr %q, want it to mention %q", tc.args, r.stderr, tc.msg)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("dlock %v: stderr shows the password: %q", tc.args, r.stderr)
		}
	}
	r := run(t, dlockCmd(t, "run", "--help"))
	wantCode(t, r, 0, "run --help")
	if !strings.Contains(r.stdout, "--grace") {
		t.Errorf("run --help does not document --grace:\n%s", r.stdout)
	}
	r = run(t, dlockCmd(t, "completion", "bash"))
	wantCode(t, r, 0, "completion bash")
	if !strings.Contains(r.stdout, "__start_dlock") {
		t.Errorf("completion bash printed no completion script")
	}
}
