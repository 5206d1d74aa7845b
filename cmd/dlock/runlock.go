package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// waitSignals end a wait for the lock (exit 128+N).
var waitSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// forwarded are passed on to the running command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// releaseTimeout bounds the release when the command has exited: past it,
// dlock exits and the lease ends by itself.
const releaseTimeout = time.Second

// runner is one "dlock run" or "dlock lead".
type runner struct {
	name    string
	o       runOptions
	store   store
	lead    bool      // dlock lead: after a loss, campaign again and run the command again
	closeBy time.Time // when the last release gives up on the store
}

func (r *runner) say(format string, args ...any) {
	if r.o.verbose {
		warn(format, args...)
	}
}

// note prints what happens to the lock while the command runs (a loss;
// for lead, leadership won): always for run, unless --quiet for lead.
func (r *runner) note(format string, args ...any) {
	if !r.lead || !r.o.quiet {
		warn(format, args...)
	}
}

// main connects to the store and runs argv under the lock: once for run;
// for lead, again each time leadership was lost, until the command exits
// by itself.
func (r *runner) main(cmd *cobra.Command, argv []string) error {
	s, err := chooseStore(cmd)
	if err != nil {
		return err
	}
	s.url = withTTLSession(s.url, r.o.ttl)
	r.store = s
	ctx, endWait := waitForSignals()
	defer func() { endWait() }()
	r.say("store %s", s.shown)
	began := time.Now()
	timeout := r.o.connectTimeout
	if r.o.waitSet && !r.o.try {
		timeout = min(timeout, r.o.wait)
	}
	locker, err := connect(ctx, s, timeout)
	if err != nil {
		return waitError(ctx, err)
	}
	if r.o.verbose {
		// What the Locker does, as the library's slog adapter says it:
		// names, owners, fences and errors, never the store's URL.
		locker.AddHook(hook.Slog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	// At the end, the Locker closes in the background, and dlock waits
	// for it only until the release's deadline: a store that does not
	// answer does not hold dlock up.
	r.closeBy = time.Now().Add(releaseTimeout)
	defer func() {
		closed := make(chan struct{})
		go func() { locker.Close(); close(closed) }() // exits when Close returns
		t := time.NewTimer(time.Until(r.closeBy))
		defer t.Stop()
		select {
		case <-closed:
		case <-t.C:
		}
	}()
	pause := time.Duration(0) // after a store failure while campaigning
	for {
		err := r.hold(ctx, endWait, locker, argv, began)
		var st *exitStatus
		if !r.lead || !errors.As(err, &st) {
			return err
		}
		switch {
		case st.lost:
			pause = 0
			if st.msg != "" {
				r.note("%s", st.msg)
			}
			r.note("lost leadership of %q; campaigning again", r.name)
			endWait() // may be ended already (it is idempotent)
			ctx, endWait = waitForSignals()
		case st.code == exitStore:
			// Like Locker.Lead (which cannot serve here: its fn gets no
			// Lock, so no fence for DLOCK_FENCE), a store that fails
			// while lead campaigns is asked again after a pause.
			pause = min(max(2*pause, time.Second), maxCampaignPause)
			r.note("%s; campaigning again in %v", st.msg, pause)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return waitError(ctx, err)
			}
		default:
			return err
		}
		began = time.Now()
	}
}

// maxCampaignPause is the longest lead waits before it asks a store that
// failed again.
const maxCampaignPause = 15 * time.Second

// waitForSignals returns the context of a wait for the lock, which the
// first of waitSignals ends (its cause a signalError), and the function
// that ends the wait: signals are then no longer caught for it.
func waitForSignals() (context.Context, func()) {
	waitSigs := make(chan os.Signal, 1)
	signal.Notify(waitSigs, waitSignals...)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { // exits when a signal arrives or the wait is over (ctx ends)
		select {
		case s := <-waitSigs:
			cancel(signalError{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(waitSigs)
		cancel(nil)
	}
}

// hold takes the lock, waiting within ctx, and runs argv while it holds
// it; endWait ends the wait once the signals go to the command. It
// returns run's exit status.
func (r *runner) hold(ctx context.Context, endWait func(), locker *dlock.Locker, argv []string, began time.Time) error {
	lock, v, err := r.acquire(ctx, locker, argv, began)
	if err != nil {
		r.closeBy = time.Now().Add(releaseTimeout)
		return err
	}
	// From here signals go to the command. Registered before the wait's
	// channel stops, so none takes its default action (death) meanwhile.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	endWait()
	defer signal.Stop(sigs)

	if r.lead {
		r.note("leading %q on %s (fence %d)", r.name, r.store.shown, lock.Fence())
	} else {
		r.say("acquired %q (fence %d)", r.name, lock.Fence())
	}
	tty := isTerminal(0)
	conts := make(chan os.Signal, 1)
	signal.Notify(conts, syscall.SIGCONT)
	defer signal.Stop(conts)
	// A command before this one may have left SIGTTIN and SIGTTOU
	// ignored (below): this one must not inherit that.
	signal.Reset(syscall.SIGTTIN, syscall.SIGTTOU)
	signal.Notify(sigs, syscall.SIGTSTP)
	if !tty {
		signal.Notify(sigs, syscall.SIGTTIN, syscall.SIGTTOU)
	}
	c, err := startChild(argv, childEnv("DLOCK_NAME="+r.name, "DLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10)), tty)
	if err != nil {
		r.release(lock)
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return fail(code, "%s %s: %v", r.verb(), argv[0], err)
	}
	if tty {
		// The command has the terminal; dlock, in the background, must be
		// able to write to it and to take the foreground back. (Ignored
		// only now: the command would inherit it.)
		signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	}
	renewCtx, stopRenewing := context.WithCancel(context.Background())
	v.warn = r.say
	go v.renew(renewCtx) // exits when stopRenewing is called or the lock is done
	err = r.supervise(c, v, sigs, conts)
	c.done()
	stopRenewing()
	r.release(lock)
	return err
}

// verb is the subcommand, for messages.
func (r *runner) verb() string {
	if r.lead {
		return "lead"
	}
	return "run"
}

// acquire takes the lock as the flags say and returns it with its lease,
// confirmed by the store within the last moments.
func (r *runner) acquire(ctx context.Context, l *dlock.Locker, argv []string, began time.Time) (*dlock.Lock, *lease, error) {
	o := r.o
	meta := holderMetadata(argv, o.recordCommand)
	opts := []dlock.Option{dlock.WithTTL(o.ttl), dlock.WithMetadata(meta), dlock.WithoutRenewal()}
	if o.lockDelay > 0 {
		opts = append(opts, dlock.WithLockDelay(o.lockDelay))
	}
	switch {
	case o.shared:
		opts = append(opts, dlock.Shared())
	case o.limit > 0:
		opts = append(opts, dlock.WithLimit(o.limit))
	}
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
				return nil, nil, lostStatus("lost the lock %q on %s before the command started: %s", r.name, r.store.shown, plain(err.Error()))
			}
			return nil, nil, storeFailed(r.store, err)
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
	case errors.Is(err, driver.ErrMode):
		// What the store holds disagrees with the mode asked for.
		return fail(exitMode, "%q on %s is held in another mode (by %s) than %s: a name is either a lock, exclusive or shared, or a semaphore whose holders all give the same --limit",
			r.name, r.store.shown, r.holder(l, "another owner"), r.o.mode())
	case errors.Is(err, dlock.ErrUnsupported):
		// The flags ask for what this store cannot do: a usage error,
		// found before any lock step was sent.
		return fail(exitUsage, "store %s cannot hold %q %s: its backend has no shared locks or semaphores", r.store.shown, r.name, r.o.mode())
	case errors.Is(err, context.DeadlineExceeded):
		return storeError(r.store, fmt.Errorf("no answer within %v", r.o.connectTimeout))
	}
	return storeFailed(r.store, err)
}

// mode describes the hold the flags ask for.
func (o runOptions) mode() string {
	switch {
	case o.shared:
		return "shared (--shared)"
	case o.limit > 0:
		return fmt.Sprintf("a permit of a semaphore of %d (--limit %d)", o.limit, o.limit)
	}
	return "exclusive"
}

// holder describes who holds the lock, if the store answers at once, and
// otherwise says unknown: the first holder's metadata, how many others
// hold it with it, and in which mode (shared, permit H/N) when not
// exclusive.
func (r *runner) holder(l *dlock.Locker, unknown string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	infos, err := l.Inspect(ctx, r.name)
	if err != nil || len(infos) == 0 {
		return unknown
	}
	first := slices.MinFunc(infos, func(a, b dlock.LockInfo) int { return cmp.Compare(a.Fence, b.Fence) })
	who := printable(first.Metadata)
	if who == "" {
		who = unknown
	}
	switch m := mode(first, len(infos)); {
	case len(infos) > 1:
		return fmt.Sprintf("%s and %d other(s) (%s)", who, len(infos)-1, m)
	case m != "exclusive":
		return fmt.Sprintf("%s (%s)", who, m)
	}
	return who
}

// release frees the lock, waiting at most releaseTimeout for the store;
// the Locker's Close, at the end, waits no longer than that either.
func (r *runner) release(lock *dlock.Lock) {
	r.closeBy = time.Now().Add(releaseTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), r.closeBy)
	defer cancel()
	err := lock.Release(ctx) // returns when ctx ends, whatever the client library does
	switch {
	case err == nil:
		r.say("released %q", r.name)
	case errors.Is(err, dlock.ErrNotHeld):
	default:
		warn("could not release %q on %s (%s); the lease ends by itself within %v", r.name, r.store.shown, plain(err.Error()), r.o.ttl)
	}
}

type signalError struct{ sig syscall.Signal }

// Error names the signal as kill -l does ("interrupted by SIGINT"),
// where its String would say "interrupted by interrupt".
func (e signalError) Error() string { return "interrupted by " + unix.SignalName(e.sig) }

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
