package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
)

func newRunCmd() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [flags] NAME -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock",
		Long: `Run takes the lock NAME, runs COMMAND with DLOCK_NAME and DLOCK_FENCE in its
environment, and releases the lock when the command exits, exiting with the
command's status. The lease is renewed every TTL/3 while the command runs.

The command runs in its own process group. SIGINT, SIGTERM, SIGHUP and
SIGQUIT are forwarded to it. If the lock is lost while it runs, the group
gets SIGTERM, then SIGKILL after --grace, and run exits with status 69.

If the lock is not acquired (--try, or --wait elapsed), run exits with
status 75 without running the command. A signal while waiting stops the
wait at once (status 128+signal).`,
		Example: `  dlock run nightly-report -- ./report.sh --since yesterday
  dlock run --try --store redis://cache:6379 migrate -- ./migrate up`,
		Args: usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.try && cmd.Flags().Changed("wait") {
				return usageError{errors.New("run: --try and --wait exclude each other")}
			}
			name, argv := args[0], args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return usageError{errors.New("run: no command given after NAME --")}
			}
			if o.wait < 0 || o.grace < 0 {
				return usageError{errors.New("run: --wait and --grace must not be negative")}
			}
			return runLocked(cmd, name, argv, o)
		},
	}
	f := c.Flags()
	f.SetInterspersed(false) // flags after NAME belong to COMMAND
	f.DurationVar(&o.ttl, "ttl", 15*time.Second, "lease length; renewed every TTL/3 while the command runs")
	f.DurationVar(&o.wait, "wait", 0, "give up after waiting this long (exit 75); 0 waits until acquired")
	f.BoolVar(&o.try, "try", false, "do not wait: exit 75 at once if the lock is held")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "after the lock is lost, time between SIGTERM and SIGKILL")
	return c
}

type runOptions struct {
	ttl, wait, grace time.Duration
	try              bool
}

var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

func runLocked(cmd *cobra.Command, name string, argv []string, o runOptions) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// Waiting: the first signal cancels the wait.
	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	waiting := make(chan struct{})
	go func() { // exits when the wait ends or a signal arrives
		select {
		case s := <-sigs:
			cancel(signalError{s.(syscall.Signal)})
		case <-waiting:
		}
	}()
	locker, store, err := openStore(ctx, cmd)
	if err != nil {
		close(waiting)
		return waitError(ctx, err)
	}
	defer locker.Close()
	lock, err := acquire(ctx, locker, name, argv, o)
	close(waiting)
	if err != nil {
		var why string
		if errors.Is(err, dlock.ErrNotAcquired) || (o.wait > 0 && errors.Is(err, context.DeadlineExceeded)) {
			why = holderOf(locker, name)
			if o.wait > 0 {
				why += fmt.Sprintf(" (waited %v)", o.wait)
			}
			return fail(exitNotAcquired, "lock %q is held by another owner%s on %s", name, why, store)
		}
		if errors.Is(err, dlock.ErrInvalid) {
			return usageError{err}
		}
		return waitError(ctx, err)
	}

	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), "DLOCK_NAME="+name, "DLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10))
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		lock.Release(context.Background())
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return fail(code, "run %s: %v", argv[0], err)
	}
	group := -child.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }() // exits with the child

	for {
		select {
		case s := <-sigs:
			syscall.Kill(group, s.(syscall.Signal))
		case err := <-exited:
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			if rerr := lock.Release(rctx); rerr != nil {
				fmt.Fprintf(os.Stderr, "dlock: %v (the lease ends by itself after %v)\n", rerr, o.ttl)
			}
			rcancel()
			return childStatus(err)
		case <-lock.Done():
			cause := context.Cause(lock.Context())
			fmt.Fprintf(os.Stderr, "dlock: lock %q lost (%v); stopping the command: SIGTERM, SIGKILL after %v\n", name, cause, o.grace)
			syscall.Kill(group, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(o.grace):
				syscall.Kill(group, syscall.SIGKILL)
				<-exited
			}
			return fail(exitLost, "command stopped: lock %q was lost", name)
		}
	}
}

func acquire(ctx context.Context, l *dlock.Locker, name string, argv []string, o runOptions) (*dlock.Lock, error) {
	host, _ := os.Hostname()
	meta := fmt.Sprintf("host=%s pid=%d cmd=%s", host, os.Getpid(), strings.Join(argv, " "))
	if len(meta) > dlock.MaxMetadataLen {
		meta = strings.ToValidUTF8(meta[:dlock.MaxMetadataLen], "")
	}
	opts := []dlock.Option{dlock.WithTTL(o.ttl), dlock.WithMetadata(meta)}
	if o.try {
		return l.TryAcquire(ctx, name, opts...)
	}
	if o.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	return l.Acquire(ctx, name, opts...)
}

// holderOf describes who holds name, if the store can tell.
func holderOf(l *dlock.Locker, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	infos, err := l.Inspect(ctx, name)
	if err != nil || len(infos) == 0 || infos[0].Metadata == "" {
		return ""
	}
	return " (" + infos[0].Metadata + ")"
}

type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

// waitError turns an error during the wait into an exit status: 128+N if
// a signal N stopped it.
func waitError(ctx context.Context, err error) error {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return fail(128+int(se.sig), "%v while waiting", se)
	}
	return err
}

// childStatus passes the command's exit status through: its code, or
// 128+N if signal N killed it.
func childStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &exitStatus{code: 128 + int(ws.Signal())}
		}
		return &exitStatus{code: ee.ExitCode()}
	}
	return err
}
