package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// defaultWatchInterval is how often status --watch refreshes by default.
const defaultWatchInterval = time.Second

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// watchStatus prints status's table to out every interval, and at once
// when a named lock's holders change, until a signal (nil) or a store
// failure (exit 74). On a terminal each table replaces the last;
// otherwise tables follow each other, separated by a blank line. Each
// interval the holders are read again (Inspect: the lease left moves on);
// named locks are observed too, so that a change shows at once (the store
// pushes it where it can), with the holders Observe sent.
func watchStatus(out io.Writer, s store, names []string, timeout, interval time.Duration) error {
	if noFile(s) {
		return fail(exitStore, "store %s does not exist (yet): no lock has been taken on it", s.shown)
	}
	s.url = readOnly(s.url)
	ctx, l, done, err := connectUntilSignal(s, timeout)
	if l == nil {
		return err
	}
	defer done()

	inspect := func() ([]dlock.LockInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return l.Inspect(cctx, names...)
	}
	observed := inspect
	changed := make(chan struct{}, 1)
	if len(names) > 0 {
		observed, err = observeAll(ctx, l, names, changed, inspect)
		if errors.Is(err, dlock.ErrUnsupported) {
			return fail(exitError, "store %s cannot observe: %s", s.shown, plain(err.Error()))
		}
		if err != nil {
			return storeError(s, err)
		}
	}

	f, ok := out.(*os.File)
	tty := ok && isTerminal(int(f.Fd()))
	t := time.NewTicker(interval)
	defer t.Stop()
	read := inspect
	for first := true; ; first = false {
		infos, err := read()
		var waiters map[string]string
		if err == nil {
			waiters, err = countWaiters(ctx, l, infos, names, timeout)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // a signal
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %v", timeout)
			}
			return storeError(s, err)
		}
		switch {
		case tty:
			fmt.Fprint(out, clearScreen)
		case !first:
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%s  %s, every %v\n", time.Now().Format(observeTime), s.shown, interval)
		if err := printStatus(out, s.shown, infos, names, waiters); err != nil {
			return fail(exitError, "status: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			read = inspect
		case <-changed:
			read = observed
		}
	}
}

// observeAll observes names on l until ctx ends, sends a value on changed
// after each change, and returns a function that returns their latest
// holders as observed (or, until every name has sent its first, those
// inspect returns).
func observeAll(ctx context.Context, l *dlock.Locker, names []string, changed chan<- struct{}, inspect func() ([]dlock.LockInfo, error)) (func() ([]dlock.LockInfo, error), error) {
	var (
		mu     sync.Mutex
		latest = make(map[string][]dlock.LockInfo)
	)
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		ch, err := l.Observe(ctx, name)
		if err != nil {
			return nil, err
		}
		go func() { // exits when Observe closes ch: ctx ended or the Locker closed
			for infos := range ch {
				mu.Lock()
				latest[name] = infos
				mu.Unlock()
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	return func() ([]dlock.LockInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		var all []dlock.LockInfo
		for _, name := range names {
			infos, ok := latest[name]
			if !ok {
				return inspect()
			}
			all = append(all, infos...)
		}
		return all, nil
	}, nil
}

// countWaiters returns the WAITERS column: for each name shown (held, or
// asked about), how many acquisitions the store queues for it, or "-"
// where the store cannot tell.
func countWaiters(ctx context.Context, l *dlock.Locker, infos []dlock.LockInfo, names []string, timeout time.Duration) (map[string]string, error) {
	waiters := make(map[string]string)
	ask := func(name string) error {
		if _, ok := waiters[name]; ok {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		n, err := l.Waiters(cctx, name)
		switch {
		case errors.Is(err, dlock.ErrUnsupported):
			waiters[name] = "-"
		case err != nil:
			return err
		default:
			waiters[name] = strconv.Itoa(n)
		}
		return nil
	}
	for _, i := range infos {
		if err := ask(i.Name); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if err := ask(n); err != nil {
			return nil, err
		}
	}
	return waiters, nil
}
