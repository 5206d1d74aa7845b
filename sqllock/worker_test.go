package sqllock_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// Worker processes are this test binary run again with workerEnv set to a
// worker's name and workerArgs to its arguments, separated by workerSep.
const (
	workerEnv  = "DLOCK_SQLLOCK_WORKER"
	workerArgs = "DLOCK_SQLLOCK_WORKER_ARGS"
	workerSep  = "\x1f"
)

var workers = map[string]func(ctx context.Context, args []string) error{
	"count": countWorker,
	"hold":  holdWorker,
}

// runWorker returns at once in the test process. In a worker process it
// runs the worker and exits: 0 on success, 1 with the error on stderr.
func runWorker() {
	name, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	w := workers[name]
	if w == nil {
		fmt.Fprintf(os.Stderr, "unknown worker %q\n", name)
		os.Exit(2)
	}
	if err := w(context.Background(), strings.Split(os.Getenv(workerArgs), workerSep)); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner // its standard output
	stderr strings.Builder
}

// startWorker runs worker name with args; it is killed when the test ends.
func startWorker(t *testing.T, name string, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+name, workerArgs+"="+strings.Join(args, workerSep))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := &worker{cmd: cmd}
	cmd.Stderr = &w.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("worker %s: %v", name, err)
	}
	w.lines = bufio.NewScanner(out)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		io.Copy(io.Discard, out)
		cmd.Wait()
	})
	return w
}

// line returns the next line the worker printed.
func (w *worker) line(t *testing.T) string {
	t.Helper()
	if !w.lines.Scan() {
		w.cmd.Wait()
		t.Fatalf("worker exited (%v) without printing a line; stderr:\n%s", w.cmd.ProcessState, w.stderr.String())
	}
	return w.lines.Text()
}

// kill kills the worker with SIGKILL and waits until it has exited.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill worker: %v", err)
	}
	for w.lines.Scan() {
	}
	w.cmd.Wait()
}

// wait waits for the worker to exit and fails the test unless it
// succeeded.
func (w *worker) wait(t *testing.T) {
	t.Helper()
	for w.lines.Scan() {
	}
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("worker: %v; stderr:\n%s", err, w.stderr.String())
	}
}

func openWorkerDB(dialect, dsn string) (*sql.DB, sqllock.Dialect, error) {
	switch dialect {
	case "mysql":
		db, err := sql.Open("mysql", dsn)
		return db, sqllock.MySQL, err
	case "postgresql":
		db, err := sql.Open("pgx", dsn)
		return db, sqllock.PostgreSQL, err
	case "sqlite":
		db, err := sql.Open("sqlite", dsn)
		return db, sqllock.SQLite, err
	}
	return nil, 0, fmt.Errorf("unknown dialect %q", dialect)
}

// countWorker args: dialect, dsn, lock name, counter file, iterations.
// Under the lock it checks that no other worker is inside (an O_EXCL
// marker file) and increments the number in the counter file.
func countWorker(ctx context.Context, args []string) error {
	db, d, err := openWorkerDB(args[0], args[1])
	if err != nil {
		return err
	}
	defer db.Close()
	name, counter := args[2], args[3]
	n, err := strconv.Atoi(args[4])
	if err != nil {
		return err
	}
	l := sqllock.New(db, d, nil)
	defer l.Close()
	for i := range n {
		k, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Second))
		if err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		marker, err := os.OpenFile(counter+".inside", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("iteration %d: another process is inside the lock: %w", i, err)
		}
		marker.Close()
		data, err := os.ReadFile(counter)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
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
			return fmt.Errorf("iteration %d: %w", i, err)
		}
	}
	return nil
}

// holdWorker args: dialect, dsn, lock name, TTL. It takes the lock with
// renewal, prints "held FENCE" and waits to be killed.
func holdWorker(ctx context.Context, args []string) error {
	db, d, err := openWorkerDB(args[0], args[1])
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	l := sqllock.New(db, d, nil)
	k, err := l.Acquire(ctx, args[2], dlock.WithTTL(ttl))
	if err != nil {
		return err
	}
	fmt.Printf("held %d\n", k.Fence())
	<-k.Done()
	return fmt.Errorf("lock lost: %v", context.Cause(k.Context()))
}
