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

// waitSignals end a wait for the lock (exit 128+N).
var waitSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// forwarded are passed on to the running command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// releaseTimeout bounds the release when the command has exited: past it,
// dlock exits and the lease ends by itself.
const releaseTimeout = time.Second

// runner is one "dlock run".
type runner struct {
	name  string
	o     runOptions
	store store
}

func (r *runner) say(format string, args ...any) {
	if r.o.verbose {
		warn(format, args...)
	}
}

func runLocked(cmd *cobra.Command, name string, argv []string, o runOptions) error {
	s, err := chooseStore(cmd)
	if err != nil {
		return err
	}
	r := &runner{name: name, o: o, store: s}

	// Waiting: the first signal ends the wait.
	waitSigs := make(chan os.Signal, 1)
	signal.Notify(waitSigs, waitSignals...)
	defer signal.Stop(waitSigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() { // exits when a signal arrives or the wait is over (ctx ends)
		select {
		case s := <-waitSigs:
			cancel(signalError{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()

	r.say("store %s", s.shown)
	began := time.Now()
	timeout := o.connectTimeout
	if o.waitSet && !o.try {
		timeout = min(timeout, o.wait)
	}
	locker, err := connect(ctx, s, timeout)
	if err != nil {
		return waitError(ctx, err)
	}
	// At the end, the Locker closes in the background, and dlock waits
	// for it only until the release's deadline: a store that does not
	// answer does not hold dlock up.
	closed := make(chan struct{})
	var closeBy time.Time
	closeLocker := func(deadline time.Time) {
		closeBy = deadline
		go func() { locker.Close(); close(closed) }() // exits when Close returns
	}
	defer func() {
		t := time.NewTimer(time.Until(closeBy))
		defer t.Stop()
		select {
		case <-closed:
		case <-t.C:
		}
	}()

	lock, v, err := r.acquire(ctx, locker, argv, began)
	if err != nil {
		closeLocker(time.Now().Add(releaseTimeout))
		return err
	}
	// From here signals go to the command. Registered before the wait's
	// channel stops, so none takes its default action (death) meanwhile.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	signal.Stop(waitSigs)
	cancel(nil)
	defer signal.Stop(sigs)

	r.say("acquired %q (fence %d)", name, lock.Fence())
	tty := isTerminal(0)
	conts := make(chan os.Signal, 1)
	signal.Notify(conts, syscall.SIGCONT)
	defer signal.Stop(conts)
	signal.Notify(sigs, syscall.SIGTSTP)
	if !tty {
		signal.Notify(sigs, syscall.SIGTTIN, syscall.SIGTTOU)
	}
	c, err := startChild(argv, childEnv("DLOCK_NAME="+name, "DLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10)), tty)
	if err != nil {
		r.release(lock, closeLocker)
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return fail(code, "run %s: %v", argv[0], err)
	}
	if tty {
		// The command has the terminal; dlock, in the background, must be
		// able to write to it and to take the foreground back. (Ignored
		// only now: the command would inherit it.)
		signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	}
	renewCtx, stopRenewing := context.WithCancel(context.Background())
	go v.renew(renewCtx) // exits when stopRenewing is called or the lock is done
	err = r.supervise(c, v, sigs, conts)
	c.done()
	stopRenewing()
	r.release(lock, closeLocker)
	return err
}

// acquire takes the lock as the flags say and returns it with its lease,
// confirmed by the store within the last moments.
func (r *runner) acquire(ctx context.Context, l *dlock.Locker, argv []string, began time.Time) (*dlock.Lock, *lease, error) {
	o := r.o
	host, _ := os.Hostname()
	meta := fmt.Sprintf("host=%s pid=%d cmd=%s", host, os.Getpid(), strings.Join(argv, " "))
	if len(meta) > dlock.MaxMetadataLen {
		meta = strings.ToValidUTF8(meta[:dlock.MaxMetadataLen], "")
	}
	opts := []dlock.Option{dlock.WithTTL(o.ttl), dlock.WithMetadata(meta), dlock.WithoutRenewal()}
	try := func() (*dlock.Lock, time.Duration, error) {
		tctx, cancel := context.WithTimeout(ctx, o.connectTimeout)
		defer cancel()
		start := clock()
		k, err := l.TryAcquire(tctx, r.name, opts...)
		return k, start, err
	}
	var (
		k     *dlock.Lock
		start time.Duration
		err   error
	)
	if o.try || o.verbose {
		k, start, err = try()
	}
	if !o.try && (!o.verbose || errors.Is(err, dlock.ErrNotAcquired)) {
		if o.verbose {
			r.say("waiting for %q, held by %s", r.name, r.holder(l, "another owner"))
		}
		wctx := ctx
		if o.waitSet {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, began.Add(o.wait))
			defer cancel()
		}
		start = clock()
		k, err = l.Acquire(wctx, r.name, opts...)
	}
	if err != nil {
		return nil, nil, r.acquireError(ctx, l, err)
	}
	v := newLease(k, o.ttl, start)
	if v.since() > o.ttl/10 {
		// A long wait: the acquisition's start says little about when
		// the lease began. Renew it, so that it is known.
		rctx, cancel := context.WithTimeout(context.Background(), min(o.connectTimeout, o.ttl/3))
		defer cancel()
		start = clock()
		if err := k.Refresh(rctx); err != nil {
			k.Release(rctx)
			if errors.Is(err, dlock.ErrNotHeld) {
				return nil, nil, fail(exitLost, "lost the lock %q on %s before the command started: %s", r.name, r.store.shown, plain(err.Error()))
			}
			return nil, nil, fail(exitStore, "store %s failed: %s", r.store.shown, plain(err.Error()))
		}
		v.good.Store(int64(start))
	}
	return k, v, nil
}

// acquireError turns a failed acquisition into an exit status: the
// conflict code when another owner holds the lock, 128+N after signal N,
// 74 when the store failed.
func (r *runner) acquireError(ctx context.Context, l *dlock.Locker, err error) error {
	if se := signalCause(ctx); se != nil {
		return fail(128+int(se.sig), "%v while waiting", se)
	}
	held := errors.Is(err, dlock.ErrNotAcquired)
	if !held && r.o.waitSet && errors.Is(err, context.DeadlineExceeded) {
		// --wait elapsed: waiting, or a store that stopped answering?
		// Asking who holds the lock tells.
		hctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		if _, ierr := l.Inspect(hctx, r.name); ierr != nil && !errors.Is(ierr, dlock.ErrUnsupported) {
			return storeError(r.store, fmt.Errorf("no answer within --wait %v: %w", r.o.wait, ierr))
		}
		held = true
	}
	switch {
	case held && r.o.quiet:
		return &exitStatus{code: r.o.conflictCode}
	case held:
		msg := fmt.Sprintf("lock %q is held by %s on %s", r.name, r.holder(l, "another owner"), r.store.shown)
		if r.o.waitSet && !r.o.try {
			msg += fmt.Sprintf(" (waited %v)", r.o.wait)
		}
		return &exitStatus{code: r.o.conflictCode, msg: msg}
	case errors.Is(err, dlock.ErrInvalid):
		return usageError{err}
	case errors.Is(err, context.DeadlineExceeded):
		return storeError(r.store, fmt.Errorf("no answer within %v", r.o.connectTimeout))
	}
	return fail(exitStore, "store %s failed: %s", r.store.shown, plain(err.Error()))
}

// holder describes who holds the lock, if the store answers at once, and
// otherwise says unknown.
func (r *runner) holder(l *dlock.Locker, unknown string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	infos, err := l.Inspect(ctx, r.name)
	if err != nil || len(infos) == 0 || infos[0].Metadata == "" {
		return unknown
	}
	return infos[0].Metadata
}

// release frees the lock, waiting at most releaseTimeout for the store,
// then closes the Locker in the background.
func (r *runner) release(lock *dlock.Lock, closeLocker func(time.Time)) {
	deadline := time.Now().Add(releaseTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := lock.Release(ctx) // returns when ctx ends, whatever the client library does
	closeLocker(deadline)
	switch {
	case err == nil:
		r.say("released %q", r.name)
	case errors.Is(err, dlock.ErrNotHeld):
	default:
		warn("could not release %q on %s (%s); the lease ends by itself within %v", r.name, r.store.shown, plain(err.Error()), r.o.ttl)
	}
}

type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

func signalCause(ctx context.Context) *signalError {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return &se
	}
	return nil
}

// waitError turns an error during the wait into an exit status: 128+N if
// a signal N stopped it.
func waitError(ctx context.Context, err error) error {
	if se := signalCause(ctx); se != nil {
		return fail(128+int(se.sig), "%v while waiting", se)
	}
	return err
}
