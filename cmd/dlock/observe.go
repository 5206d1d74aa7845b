package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

func newObserveCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "observe [flags] NAME",
		Short: "Print who holds a lock, then each change as it happens",
		Long: `Observe prints the holders of the lock NAME now, then one line each time
they change (a holder comes or goes), until Ctrl-C or SIGTERM (or SIGHUP,
SIGQUIT), which end it with status 0.

What it sees depends on the store. etcd, ZooKeeper and SQLite (on Linux)
push every change. PostgreSQL, MySQL/MariaDB and Redlock wake observe when
a holder releases, and it reads the store at least every 2 s: a hold that
starts and ends between two reads is not shown. Redis (and SQLite
elsewhere) is read every 2 s, and nothing wakes observe between reads: a
hold shorter than that may not be shown (two holds of 0.8 s and 0.3 s can
both be missed).

Each line is the local time, NAME, then "free", or each holder, oldest
(lowest fence) first, separated by "; ":
  fence=F owner=O mode=M metadata="..."
with M exclusive, shared, or "permit permits=H/N" for a semaphore of N
permits of which H are held ("permit H/N" in "dlock status"). --json prints one JSON object per line
instead: {time, name, holders}, holders as in "dlock status --json" (an
empty list when free).

A holder seen here is a hint for people and scripts, not proof of
ownership: by the time the line is read it may be gone. Observe asks the
store every --connect-timeout whether it still answers; if it does not
answer within that (or fails), observe exits 74.

Exit status: 0 after a signal; 74 the store could not be reached or
failed; 64 usage error (nothing contacted).`,
		Example: `  dlock observe --store redis://redis:6379 nightly-report
  dlock observe --json exports | jq -c '.holders | length'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := driver.ValidateName(name); err != nil {
				return badName("observe", name, err)
			}
			timeout := connectTimeout(cmd)
			if timeout <= 0 {
				return usageError{errors.New("observe: --connect-timeout must be positive")}
			}
			s, err := chooseStore(cmd)
			if err != nil {
				return err
			}
			return observe(cmd.OutOrStdout(), s, name, timeout, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per change: {time, name, holders}, holders as in status --json")
	return c
}

// observe prints name's holders and their changes to out until a signal
// (nil) or a store failure (exit 74).
func observe(out io.Writer, s store, name string, timeout time.Duration, asJSON bool) error {
	sigCtx, l, done, err := connectUntilSignal(s, timeout)
	if l == nil {
		return err
	}
	defer done()
	ctx, stop := context.WithCancelCause(sigCtx)
	defer stop(nil)
	changes, err := l.Observe(ctx, name)
	if err != nil {
		if errors.Is(err, dlock.ErrUnsupported) {
			return fail(exitError, "store %s cannot observe %q: %s", s.shown, name, plain(err.Error()))
		}
		return storeFailed(s, err)
	}
	go checkStore(ctx, stop, l, s, name, timeout) // exits when ctx ends
	for infos := range changes {
		if err := printChange(out, time.Now(), name, infos, asJSON); err != nil {
			return fail(exitError, "observe: %v", err)
		}
	}
	var st *exitStatus
	if errors.As(context.Cause(ctx), &st) {
		return st // the store stopped answering
	}
	return nil // a signal, or the Locker closed
}

// connectUntilSignal connects to s, within timeout, for a command that
// runs until a signal (waitSignals): it returns the Locker and a context
// that the first signal ends, or a nil Locker, with a nil error if a
// signal came while connecting. done closes the Locker and stops catching
// the signals.
func connectUntilSignal(s store, timeout time.Duration) (ctx context.Context, l *dlock.Locker, done func(), err error) {
	ctx, endWait := waitForSignals()
	l, err = connect(ctx, s, timeout)
	if err != nil {
		endWait()
		if signalCause(ctx) != nil {
			err = nil
		}
		return ctx, nil, nil, err
	}
	return ctx, l, func() { l.Close(); endWait() }, nil
}

// checkStore asks the store every period whether it still answers, and
// ends observe (stop, with exit 74) when it does not within period: the
// library's Observe keeps asking a store that fails, silently.
func checkStore(ctx context.Context, stop context.CancelCauseFunc, l *dlock.Locker, s store, name string, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, period)
		_, err := l.Inspect(cctx, name)
		cancel()
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %v", period)
			}
			stop(storeError(s, err))
			return
		}
	}
}

// observeTime is the time format of observe's lines.
const observeTime = "2006-01-02T15:04:05.000Z07:00"

// change is one line of observe --json.
type change struct {
	Time    string        `json:"time"`
	Name    string        `json:"name"`
	Holders []statusEntry `json:"holders"`
}

// printChange prints one line of observe: name's holders at now.
func printChange(out io.Writer, now time.Time, name string, infos []dlock.LockInfo, asJSON bool) error {
	entries := statusEntries(infos, nil)
	if asJSON {
		return writeJSON(out, change{Time: now.Format(observeTime), Name: name, Holders: entries}, false)
	}
	line := fmt.Sprintf("%s %q ", now.Format(observeTime), name)
	if len(entries) == 0 {
		line += "free"
	}
	for i, e := range entries {
		if i > 0 {
			line += "; "
		}
		m, permits, _ := strings.Cut(e.mode, " ") // "permit H/N"
		line += fmt.Sprintf("fence=%d owner=%s mode=%s ", e.Fence, printable(e.Owner), m)
		if permits != "" {
			line += "permits=" + permits + " "
		}
		line += fmt.Sprintf("metadata=%q", e.Metadata)
	}
	_, err := fmt.Fprintln(out, line)
	return err
}
