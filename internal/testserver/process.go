// Package testserver starts real database servers for dlock's integration
// tests.
//
// Every server is a separate process started from the binary installed on the
// machine (for example /usr/bin/redis-server). It listens on a free loopback
// port, keeps its files in a temporary directory of the test and is killed
// when the test ends. There are no fakes: when a binary is missing, the tests
// that need it are skipped, or fail if DLOCK_REQUIRE_SERVERS=1 is set.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	startTimeout  = 60 * time.Second // per attempt, until the server answers (a JVM on a loaded 2-core host took over 10 s)
	startAttempts = 3                // attempts when the server exits during startup
	killTimeout   = 10 * time.Second // until a killed server has exited
	logTailLines  = 20               // log lines quoted when startup fails
	maxBusPort    = 55000            // largest port whose cluster bus port is port+10000
)

// Require reports whether the environment demands real servers, that is
// whether DLOCK_REQUIRE_SERVERS=1 is set. Under Require a missing server
// binary fails the test instead of skipping it.
func Require() bool {
	return os.Getenv("DLOCK_REQUIRE_SERVERS") == "1"
}

// Need returns the path of binary, looked up in PATH. If binary is missing,
// Need fails the test with t.Fatalf when Require reports true, naming the
// Debian package aptPackage to install, and skips the test with t.Skipf
// otherwise. Need returns "" only if t.Fatalf or t.Skipf return, which they do
// not for a real *testing.T.
func Need(t testing.TB, binary, aptPackage string) string {
	t.Helper()
	path, err := exec.LookPath(binary)
	if err == nil {
		return path
	}
	if Require() {
		t.Fatalf("%s not found in PATH, but DLOCK_REQUIRE_SERVERS=1 demands real servers; install it with: apt-get install %s", binary, aptPackage)
	} else {
		t.Skipf("%s not found; run ./scripts/test (installs servers) or set DLOCK_REQUIRE_SERVERS=1", binary)
	}
	return ""
}

// process is a running (or exited) server process.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // result of cmd.Wait; read it only after done is closed
}

// startProcess starts bin with args in dir, appending its stdout and stderr
// to logPath. The process gets its own process group, so that signals meant
// for the test (such as Ctrl-C) do not reach it, and is killed if the test
// process dies without running its cleanups.
func startProcess(bin string, args []string, dir, logPath string, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process; it fails if the process has exited.
func (p *process) signal(sig os.Signal) error {
	if p.exited() {
		return fmt.Errorf("process %d has exited (%v)", p.pid(), p.err)
	}
	return p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL to the process, which also ends a stopped process, and
// waits until it has exited. Killing an exited process does nothing.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill process %d: %w", p.pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("process %d still running %v after SIGKILL", p.pid(), killTimeout)
	}
}

// logTail returns the last lines of the process's log, indented for a
// failure message.
func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "\t(no log: " + err.Error() + ")"
	}
	return "\t" + strings.ReplaceAll(lastLines(data, logTailLines), "\n", "\n\t")
}

// probeFunc checks whether the server process with the given pid answers on
// 127.0.0.1:port.
type probeFunc func(port, pid int) error

// launch starts a server in dir and waits until probe succeeds. The server's
// command line is args(port) and its output goes to dir/server.log. If port
// is 0, launch picks a free port for every attempt (with a free cluster bus
// port at port+10000 if bus is set); otherwise it reuses port. If the server
// exits before it answers (for example because its port was taken in the
// meantime), launch tries again, startAttempts times in all. It returns the
// process and its port, and fails the test if the server does not start.
func launch(t testing.TB, bin, dir string, port int, bus bool, args func(port int) []string, probe probeFunc) (*process, int) {
	t.Helper()
	return launchEnv(t, bin, dir, port, bus, args, probe, nil)
}

// launchEnv is launch with env added to the server's environment (see
// Clock).
func launchEnv(t testing.TB, bin, dir string, port int, bus bool, args func(port int) []string, probe probeFunc, env []string) (*process, int) {
	t.Helper()
	logPath := filepath.Join(dir, "server.log")
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		p := port
		if p == 0 {
			p = freePort(t, bus)
		} else if attempt > 1 {
			time.Sleep(200 * time.Millisecond) // give the old owner of the port time to go away
		}
		var proc *process
		proc, err = startProcess(bin, args(p), dir, logPath, env)
		if err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		if err = waitReady(proc, p, probe); err == nil {
			return proc, p
		}
		if !proc.exited() {
			// Alive but not answering: retrying would not help.
			if kerr := proc.kill(); kerr != nil {
				t.Errorf("%v", kerr)
			}
			t.Fatalf("%s on 127.0.0.1:%d: %v; last lines of %s:\n%s", bin, p, err, logPath, proc.logTail())
		}
		err = fmt.Errorf("on 127.0.0.1:%d: %w; last lines of %s:\n%s", p, err, logPath, proc.logTail())
	}
	t.Fatalf("%s failed to start after %d attempts; last attempt %v", bin, startAttempts, err)
	return nil, 0
}

// waitReady polls probe until it succeeds, the process exits, or
// startTimeout passes.
func waitReady(p *process, port int, probe probeFunc) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := probe(port, p.pid())
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("server exited during startup (%v)", p.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server did not answer within %v (last error: %v)", startTimeout, err)
		}
	}
}

// freePort returns a loopback TCP port that is free right now. If bus is set,
// the port is at most maxBusPort and port+10000, which Redis Cluster uses for
// its bus, is free as well.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := !bus || (port <= maxBusPort && portFree(port+10000))
		l.Close()
		if ok {
			return port
		}
	}
	t.Fatalf("found no free port (with bus port: %v) in 100 tries", bus)
	return 0
}

// portFree reports whether a listener can be opened on 127.0.0.1:port.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
