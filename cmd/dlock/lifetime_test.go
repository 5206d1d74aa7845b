package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// sqliteStore returns the URL of a SQLite store in a temporary directory:
// a real store shared by the test's dlock processes.
func sqliteStore(t *testing.T) string {
	t.Helper()
	return "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
}

// procState returns the state letter of process pid in /proc (R, S, T,
// Z, ...), and false if there is no such process.
func procState(pid int) (byte, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, false
	}
	return s[i+2], true
}

// procField returns field n (1-based, as in proc(5)) of /proc/pid/stat
// as a number, or -1.
func procField(pid, n int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if err != nil || i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:]) // from field 3
	if n < 3 || n-3 >= len(f) {
		return -1
	}
	v, err := strconv.Atoi(f[n-3])
	if err != nil {
		return -1
	}
	return v
}

// guards describes every guard process on the machine (pid, state,
// parent, group, what its stdin is), for a failure message.
func guards() string {
	var b strings.Builder
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if !strings.Contains(string(cmdline), guardArg) {
			continue
		}
		st, _ := procState(pid)
		in, _ := os.Readlink("/proc/" + d.Name() + "/fd/0")
		fmt.Fprintf(&b, "[pid %d state %c parent %d group %d stdin %s] ", pid, st, procField(pid, 4), procField(pid, 5), in)
	}
	if b.Len() == 0 {
		return "none running"
	}
	return b.String()
}

// gone reports whether pid has exited (a zombie has).
func gone(pid int) bool {
	st, ok := procState(pid)
	return !ok || st == 'Z' || st == 'X'
}

// readPid waits for a pid written to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	waitFile(t, path, "\n")
	data, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %q", path, data)
	}
	return pid
}

// ticker is a command that writes its pid to dir/pid, then appends a line
// to dir/log every 50ms until stopped.
func ticker(dir string) []string {
	return []string{"sh", "-c", `echo $$ > "$1/pid"; while :; do echo tick >> "$1/log"; sleep 0.05; done`, "sh", dir}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

func TestRunKill9KillsCommand(t *testing.T) {
	store, dir := sqliteStore(t), t.TempDir()
	c := dlockCmd(t, append([]string{"run", "--store", store, "--ttl", "1s", "job", "--"}, ticker(dir)...)...)
	killDlock(t, c, store, dir, "command")
}

// The command's own children die with dlock too: the kernel's death
// signal reaches only the command, dlock's guard the rest of its group.
func TestRunKill9KillsCommandsChildren(t *testing.T) {
	store, dir := sqliteStore(t), t.TempDir()
	// The outer shell waits for an inner one that writes its pid and
	// ticks: the inner shell is the command's child.
	inner := `echo $$ > "$1/pid"; while :; do echo tick >> "$1/log"; sleep 0.05; done`
	c := dlockCmd(t, "run", "--store", store, "--ttl", "1s", "job", "--", "sh", "-c", `sh -c '`+inner+`' sh "$1"; :`, "sh", dir)
	killDlock(t, c, store, dir, "the command's child")
}

// killDlock starts dlock c, whose command writes the pid of what (the
// command, or a process it started) to dir/pid and ticks into dir/log,
// kills dlock with SIGKILL, and at once starts a second holder of the
// same name, which gets it once the 1 s lease has run out. The adversary
// is a command (or its child) that outlives dlock: it would tick after
// the second holder wrote its line. That order is the fact checked; the
// time what takes to go is only logged (on a loaded machine the guard can
// take a second to be scheduled).
func killDlock(t *testing.T, c *exec.Cmd, store, dir, what string) {
	t.Helper()
	// dlock's stderr (and its guard's, which shares it) goes to a file,
	// read if the test fails: the result arrives only once the command is
	// gone too, so it is not awaited.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	c.Stderr = stderr
	start(t, c)
	pid := readPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	r := run(t, dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", `echo second >> "$1/log"; sleep 0.3`, "sh", dir))
	wantCode(t, r, 0, "second run after kill -9")
	if !testkit.Poll(30*time.Second, func() bool { return gone(pid) }) {
		st, _ := procState(pid)
		out, _ := os.ReadFile(filepath.Join(dir, "stderr"))
		t.Fatalf("%s (pid %d) still running %v after kill -9 of dlock (state %c, process group %d), want it killed with dlock\nguards: %s\ndlock's stderr:\n%s",
			what, pid, time.Since(killed), st, procField(pid, 5), guards(), out)
	}
	t.Logf("%s gone %v after kill -9 of dlock", what, time.Since(killed))
	data, _ := os.ReadFile(filepath.Join(dir, "log"))
	if lines := strings.Fields(string(data)); len(lines) == 0 || lines[len(lines)-1] != "second" {
		t.Errorf("log ends %q, want the second holder's line last: %s overlapped it", lines[max(0, len(lines)-3):], what)
	}
}

// The command starts in its guard's process group, led by the guard: a
// kill -9 of dlock at any moment after the command started finds a guard
// that knows the group (the adversary: a kill that once came between the
// command's start and dlock telling its guard the group, while dlock's
// main goroutine waited to be scheduled; the command's children ran on).
func TestRunCommandInGuardsGroup(t *testing.T) {
	store, dir := sqliteStore(t), t.TempDir()
	script := `pg=$(cut -d' ' -f5 /proc/$$/stat); tr '\0' ' ' < /proc/$pg/cmdline > "$1/leader"`
	r := run(t, dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", script, "sh", dir))
	wantCode(t, r, 0, "run of a command that reads its group's leader")
	leader, err := os.ReadFile(filepath.Join(dir, "leader"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(leader), guardArg) {
		t.Errorf("the command's process group is led by %q, want dlock's guard (%s)", leader, guardArg)
	}
}

// A command's background processes left when it exits normally are not
// killed: only dlock's death makes the guard act.
func TestRunGuardDismissedOnExit(t *testing.T) {
	store, dir := sqliteStore(t), t.TempDir()
	r := run(t, dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", `sleep 30 >/dev/null 2>&1 & echo $! > "$1/pid"`, "sh", dir))
	wantCode(t, r, 0, "run of a command that leaves a background process")
	pid := readPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	time.Sleep(200 * time.Millisecond) // a guard that was not dismissed would have acted by now
	if gone(pid) {
		t.Errorf("the command's background process (pid %d) was killed after dlock exited normally, want it left alone", pid)
	}
}

// stopped waits for pid to be stopped (state T).
func waitStopped(t *testing.T, pid int, what string) {
	t.Helper()
	// Generous: a process in uninterruptible sleep (D) stops only when it
	// leaves it, which on a machine busy with I/O can take seconds.
	if !testkit.Poll(15*time.Second, func() bool { st, _ := procState(pid); return st == 'T' }) {
		st, _ := procState(pid)
		t.Fatalf("%s (pid %d) state %c, want stopped (T)", what, pid, st)
	}
}

// jobCmd is dlockCmd in a process group of its own, as a shell with job
// control starts it: a group whose parent (the test) is in another group
// of the session is not orphaned, so the kernel lets SIGTSTP stop it.
func jobCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	c := dlockCmd(t, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// stoppedJob starts "dlock run" of a ticker with lease ttl as a job, sends
// it SIGTSTP and returns once both dlock and the command are stopped.
func stoppedJob(t *testing.T, ttl string) (store, dir string, c *exec.Cmd, done <-chan result, pid int) {
	t.Helper()
	store, dir = sqliteStore(t), t.TempDir()
	c = jobCmd(t, append([]string{"run", "--store", store, "--ttl", ttl, "job", "--"}, ticker(dir)...)...)
	done = start(t, c)
	pid = readPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	c.Process.Signal(syscall.SIGTSTP)
	waitStopped(t, pid, "command after SIGTSTP to dlock")
	waitStopped(t, c.Process.Pid, "dlock after SIGTSTP")
	return store, dir, c, done, pid
}

func TestRunStopsCommandWithItself(t *testing.T) {
	t.Run("continued in time", func(t *testing.T) {
		store, dir, c, done, _ := stoppedJob(t, "6s")
		size := fileSize(filepath.Join(dir, "log"))
		time.Sleep(300 * time.Millisecond)
		if now := fileSize(filepath.Join(dir, "log")); now != size {
			t.Errorf("the stopped command wrote %d bytes", now-size)
		}
		c.Process.Signal(syscall.SIGCONT)
		if !testkit.Poll(10*time.Second, func() bool { return fileSize(filepath.Join(dir, "log")) > size }) {
			t.Fatalf("the command did not go on after SIGCONT to dlock")
		}
		r := run(t, dlockCmd(t, "run", "--try", "--store", store, "job", "--", "true"))
		wantCode(t, r, exitNotAcquired, "run --try while the continued dlock holds the lock")
		c.Process.Signal(syscall.SIGTERM)
		wantCode(t, <-done, 128+int(syscall.SIGTERM), "dlock run, SIGTERM passed on to the command")
	})
	t.Run("continued after the lease", func(t *testing.T) {
		_, dir, c, done, pid := stoppedJob(t, "1s")
		time.Sleep(2 * time.Second) // the 1s lease runs out
		size := fileSize(filepath.Join(dir, "log"))
		c.Process.Signal(syscall.SIGCONT)
		r := <-done
		wantCode(t, r, exitLost, "dlock continued after its lease ran out")
		if !strings.Contains(r.stderr, "may have run out") {
			t.Errorf("stderr = %q, want it to say the lease may have run out", r.stderr)
		}
		if !testkit.Poll(time.Second, func() bool { return gone(pid) }) {
			t.Fatalf("command still running after dlock exited 69")
		}
		time.Sleep(200 * time.Millisecond)
		if now := fileSize(filepath.Join(dir, "log")); now != size {
			t.Errorf("the command wrote %d bytes after its lease ran out, want none", now-size)
		}
	})
}

func TestRunSIGSTOPed(t *testing.T) {
	store, dir := sqliteStore(t), t.TempDir()
	// The command ignores SIGTERM: only SIGKILL stops it promptly.
	cmd := []string{"sh", "-c", `trap '' TERM; echo $$ > "$1/pid"; while :; do echo tick >> "$1/log"; sleep 0.05; done`, "sh", dir}
	c := dlockCmd(t, append([]string{"run", "--store", store, "--ttl", "1s", "--grace", "30s", "job", "--"}, cmd...)...)
	done := start(t, c)
	pid := readPid(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	c.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, c.Process.Pid, "dlock after SIGSTOP")
	time.Sleep(2 * time.Second) // longer than the 1s lease
	c.Process.Signal(syscall.SIGCONT)
	continued := time.Now()
	if !testkit.Poll(time.Second, func() bool { return gone(pid) }) {
		t.Fatalf("command still running %v after SIGCONT of a dlock stopped past its lease", time.Since(continued))
	}
	t.Logf("command gone %v after SIGCONT", time.Since(continued))
	wantCode(t, <-done, exitLost, "dlock continued after SIGSTOP past its lease")
}
