// Package testworker runs the test binary again as a worker process, for
// tests of claims that cross process boundaries: mutual exclusion between
// processes, and what happens to a lock when its holder is killed.
//
// A test package calls Run at the top of TestMain with its workers; a
// test calls Start to launch one and reads the lines it prints.
package testworker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

const (
	envName = "DLOCK_TEST_WORKER"
	envArgs = "DLOCK_TEST_WORKER_ARGS"
	argSep  = "\x1f"
)

// Func is a worker: it runs in its own process with the arguments Start
// was given and communicates by printing lines to standard output. ctx
// ends on SIGTERM or SIGINT.
type Func func(ctx context.Context, args []string) error

// Run returns at once in a normal test process. In a process started by
// Start it runs the named worker from workers and exits: with status 0 if
// it returned nil, 1 otherwise.
func Run(workers map[string]Func) {
	name, ok := os.LookupEnv(envName)
	if !ok {
		return
	}
	w := workers[name]
	if w == nil {
		fmt.Fprintf(os.Stderr, "testworker: unknown worker %q\n", name)
		os.Exit(2)
	}
	var args []string
	if a := os.Getenv(envArgs); a != "" {
		args = strings.Split(a, argSep)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := w(ctx, args)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testworker %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Process is a running worker.
type Process struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string
	done   chan struct{} // closed when the process has exited
	err    error         // exit status, valid after done
	stderr strings.Builder
	mu     sync.Mutex // guards stderr
}

// Start launches worker name with args in a new process running this test
// binary, and kills it at the end of the test if it is still running.
func Start(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envName+"="+name, envArgs+"="+strings.Join(args, argSep))
	p := &Process{name: name, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stderr.Write(b)
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testworker %s: %v", name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testworker %s: start: %v", name, err)
	}
	go func() { // exits at EOF on the worker's stdout, then reaps it
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		go func() { // drains lines nobody read, so the reaper can finish
			for range p.lines {
			}
		}()
		<-p.done
		if s := p.Stderr(); s != "" && t.Failed() {
			t.Logf("worker %s stderr:\n%s", name, s)
		}
	})
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Stderr returns what the worker wrote to standard error so far.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Expect waits up to timeout for the worker to print a line starting with
// prefix, skipping other lines, and returns the rest of that line.
func (p *Process) Expect(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("worker %s exited (%v) before printing %q; stderr:\n%s", p.name, p.err, prefix, p.Stderr())
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return strings.TrimSpace(rest)
			}
		case <-deadline:
			t.Fatalf("worker %s printed no %q within %v; stderr:\n%s", p.name, prefix, timeout, p.Stderr())
		}
	}
}

// Kill kills the worker with SIGKILL and waits for it to exit.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !testkit.IsClosed(p.done) {
		t.Fatalf("kill worker %s: %v", p.name, err)
	}
	<-p.done
}

// Signal sends sig to the worker.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal worker %s: %v", p.name, err)
	}
}

// Wait waits up to timeout for the worker to exit and returns its exit
// error (nil for status 0).
func (p *Process) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("worker %s still running after %v", p.name, timeout)
		return nil
	}
}

// Hold is a worker for any backend: args are a store URL (its backend
// must be imported by the test package), a lock name and a TTL. It takes
// the lock (renewed), prints "acquired FENCE" and holds it until killed or
// signalled.
func Hold(ctx context.Context, args []string) error {
	l, name, ttl, err := OpenStore(ctx, "hold", args)
	if err != nil {
		return err
	}
	defer l.Close()
	k, err := l.Acquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		return err
	}
	fmt.Printf("acquired %d\n", k.Fence())
	<-ctx.Done()
	return k.Release(context.Background())
}

// OpenStore parses the args of a worker named worker that takes a store
// URL, a lock name and a TTL (as Hold does), and opens the store.
func OpenStore(ctx context.Context, worker string, args []string) (l *dlock.Locker, name string, ttl time.Duration, err error) {
	if len(args) != 3 {
		return nil, "", 0, fmt.Errorf("%s: want STORE NAME TTL, got %q", worker, args)
	}
	if ttl, err = time.ParseDuration(args[2]); err != nil {
		return nil, "", 0, err
	}
	l, err = dlock.Open(ctx, args[0])
	return l, args[1], ttl, err
}

// StartHolder starts a Hold worker and returns it once it holds the lock,
// with the lock's fencing token.
func StartHolder(t testing.TB, store, name string, ttl time.Duration) (*Process, uint64) {
	t.Helper()
	p := Start(t, "hold", store, name, ttl.String())
	f, err := strconv.ParseUint(p.Expect(t, "acquired", 30*time.Second), 10, 64)
	if err != nil {
		t.Fatalf("worker hold: bad fencing token: %v", err)
	}
	return p, f
}

// Count is a worker for any backend: args are a store URL, a lock name, a
// counter file and a number of rounds. Each round takes the lock, checks
// that no other worker is inside (an O_EXCL marker file next to the
// counter), increments the number in the counter file, and releases.
func Count(ctx context.Context, args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("count: want STORE NAME COUNTER ROUNDS, got %q", args)
	}
	rounds, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	l, err := dlock.Open(ctx, args[0])
	if err != nil {
		return err
	}
	defer l.Close()
	name, counter := args[1], args[2]
	for i := range rounds {
		k, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Second))
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		marker, err := os.OpenFile(counter+".inside", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("round %d: another process is inside the lock: %w", i, err)
		}
		marker.Close()
		data, err := os.ReadFile(counter)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		v, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		if err := os.WriteFile(counter, []byte(strconv.Itoa(v+1)), 0o644); err != nil {
			return err
		}
		if err := os.Remove(counter + ".inside"); err != nil {
			return err
		}
		if err := k.Release(ctx); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
	}
	return nil
}
