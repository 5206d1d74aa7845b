package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/internal/fairness"
	"github.com/spf13/cobra"
)

type demoOptions struct {
	workers, procs, stock int
	noLock, pause         bool
	ttl                   time.Duration
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	c := &cobra.Command{
		Use:   "demo [flags]",
		Short: "Sell stock from many processes under a lock, and see what breaks without one",
		Long: `Demo runs the classic scenario: --procs worker processes with --workers
goroutines each buy items from a shared stock of --stock, each purchase a
read-modify-write under the lock. At the end it prints what was sold, the
stock left, how much was oversold, orders per worker process (with Jain's
fairness index over them), throughput and the lock handoff latency between
holders.

--no-lock does the same without the lock and oversells.
--pause makes one goroutine per process stall past its lease in the middle
of a purchase (like a long GC pause) and runs the sale twice: once with
plain writes, which a stale holder corrupts, and once with writes checked
against the fencing token, which the storage rejects when stale.

The store is tried once before any worker starts. Exit status: 0 after
the sale; 1 when the lock did not prevent overselling; 74 the store
could not be reached; 77 it denied access; 64 usage error (--ttl outside
[100ms, 24h] included; nothing contacted); 128+N after signal N (the
workers are stopped and the demo's files removed).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.noLock && o.pause {
				return usageError{errors.New("demo: --no-lock and --pause exclude each other")}
			}
			if o.workers < 1 || o.procs < 1 || o.stock < 1 {
				return usageError{errors.New("demo: --workers, --procs and --stock must be at least 1")}
			}
			if err := checkTTL("demo", o.ttl); err != nil {
				return err
			}
			return runDemo(cmd, o)
		},
	}
	f := c.Flags()
	f.IntVar(&o.workers, "workers", 8, "goroutines per worker process")
	f.IntVar(&o.procs, "procs", 4, "worker processes")
	f.IntVar(&o.stock, "stock", 300, "items in stock")
	f.BoolVar(&o.noLock, "no-lock", false, "buy without the lock (oversells)")
	f.BoolVar(&o.pause, "pause", false, "stall some holders past their lease; compare plain and fenced writes")
	f.DurationVar(&o.ttl, "ttl", time.Second, "lease of the lock; with --pause, holders stall 1.5×TTL")
	return c
}

func runDemo(cmd *cobra.Command, o demoOptions) error {
	s, err := chooseStore(cmd)
	if err != nil {
		return err
	}
	store := s.url
	// SIGINT, SIGTERM, SIGHUP and SIGQUIT stop the workers and remove
	// the demo's files before dlock exits.
	ctx, endWait := waitForSignals()
	defer endWait()
	if u, err := url.Parse(store); err == nil && u.Scheme == "mem" && o.procs > 1 {
		return usageError{errors.New("demo: mem:// locks live in one process; use --procs 1 or another --store")}
	}
	// The store is tried here, once, before any worker starts: a store
	// that is down or refuses the credentials ends the demo with run's
	// exit status (74, 77) and one line, not with a worker's error.
	l, err := connect(ctx, s, connectTimeout(cmd))
	if err != nil {
		return waitError(ctx, err)
	}
	l.Close()
	out := cmd.OutOrStdout()
	mode := "under the lock"
	if o.noLock {
		mode = "WITHOUT a lock"
	}
	fmt.Fprintf(out, "dlock demo: %d processes × %d goroutines buy %d items %s; store %s\n",
		o.procs, o.workers, o.stock, mode, s.shown)
	phases := []bool{!o.noLock} // fenced writes when locked
	if o.pause {
		phases = []bool{false, true}
	}
	var failed bool
	for _, fenced := range phases {
		if o.pause {
			fmt.Fprintf(out, "\n%s: holders stall %v past a %v lease mid-purchase\n", map[bool]string{false: "plain writes", true: "fenced writes"}[fenced], o.ttl*3/2, o.ttl)
		}
		r, err := demoPhase(ctx, store, o, fenced)
		if se := signalCause(ctx); se != nil {
			return fail(128+int(se.sig), "demo %v: workers stopped, files removed", se)
		}
		if err != nil {
			return err
		}
		r.print(out)
		failed = failed || r.oversold() > 0 || r.sold+r.left != o.stock
	}
	if failed && !o.noLock && !o.pause {
		return fail(exitError, "the lock did not prevent overselling")
	}
	return nil
}

// demoPhase runs one sale and gathers its result.
func demoPhase(ctx context.Context, store string, o demoOptions, fenced bool) (*demoResult, error) {
	dir, err := os.MkdirTemp("", "dlock-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sh, err := newShop(filepath.Join(dir, "shop"), o.stock)
	if err != nil {
		return nil, err
	}
	defer sh.close()
	var b [6]byte
	rand.Read(b[:])
	name := "dlock-demo/stock-" + hex.EncodeToString(b[:])
	args := []string{"--dir", dir, "--name", name, "--workers", strconv.Itoa(o.workers),
		"--ttl", o.ttl.String()}
	if o.noLock {
		args = append(args, "--no-lock")
	}
	if o.pause {
		args = append(args, "--pause")
	}
	if fenced {
		args = append(args, "--fenced")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	stopProgress := progress(sh, o.stock)
	err = startWorkers(ctx, o.procs, args, store)
	stopProgress()
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	r, err := collect(dir, o.procs)
	if err != nil {
		return nil, err
	}
	r.stock, r.elapsed, r.locked, r.procs = o.stock, elapsed, !o.noLock, o.procs
	if r.left, err = sh.read(); err != nil {
		return nil, err
	}
	return r, nil
}

// startWorkers runs procs worker processes (this executable's hidden
// demo-worker command), or one in this process when procs is 1. The store
// URL goes by environment, not argv, where ps would show its password.
// Workers die with ctx, and with dlock (see dieWithParent).
func startWorkers(ctx context.Context, procs int, args []string, store string) error {
	if procs == 1 {
		return runDemoWorkerArgs(ctx, append(args, "--id", "0"), store)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for i := range procs {
		c := exec.CommandContext(ctx, exe, append([]string{"demo-worker", "--id", strconv.Itoa(i)}, args...)...)
		var stderr strings.Builder
		c.Stderr = &stderr
		c.Env = append(childEnv(), demoStoreEnv+"="+store)
		c.SysProcAttr = &syscall.SysProcAttr{}
		dieWithParent(c.SysProcAttr)
		if err := c.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			if err := c.Wait(); err != nil {
				errs <- fmt.Errorf("worker %d: %v: %s", i, err, strings.TrimSpace(stderr.String()))
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// progress prints a live line on a terminal until stopped.
func progress(sh shop, stock int) (stop func()) {
	fi, err := os.Stdout.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Print("\r\033[K")
				return
			case <-t.C:
				if left, err := sh.read(); err == nil {
					fmt.Printf("\r\033[K  selling... %d of %d left", left, stock)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// section is one purchase attempt as a worker logged it.
type section struct {
	worker   int
	fence    uint64
	acquired int64 // unix ns, comparable across processes on one host
	released int64
	accepted bool
}

type demoResult struct {
	stock, sold, left, rejected int
	procs                       int
	perWorker                   map[int]int
	elapsed                     time.Duration
	locked                      bool
	handoffs                    []time.Duration
	overlaps                    int
}

func (r *demoResult) oversold() int { return max(0, r.sold-r.stock) }

func collect(dir string, procs int) (*demoResult, error) {
	r := &demoResult{perWorker: map[int]int{}}
	var all []section
	for i := range procs {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("sections-%d", i)))
		if err != nil {
			return nil, err
		}
		ss, err := readSections(f, i)
		f.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, ss...)
	}
	slices.SortFunc(all, func(a, b section) int { return int(a.acquired - b.acquired) })
	for i, s := range all {
		if s.accepted {
			r.sold++
			r.perWorker[s.worker]++
		} else {
			r.rejected++
		}
		if i > 0 {
			if d := s.acquired - all[i-1].released; d >= 0 {
				r.handoffs = append(r.handoffs, time.Duration(d))
			} else {
				r.overlaps++
			}
		}
	}
	return r, nil
}

func readSections(rd io.Reader, worker int) ([]section, error) {
	var ss []section
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		var s section
		var acc int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %d", &s.fence, &s.acquired, &s.released, &acc); err != nil {
			return nil, fmt.Errorf("worker %d log: %q: %w", worker, sc.Text(), err)
		}
		s.worker, s.accepted = worker, acc == 1
		ss = append(ss, s)
	}
	return ss, sc.Err()
}

func (r *demoResult) print(w io.Writer) {
	check := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "WRONG"
	}
	fmt.Fprintf(w, "  sold         %d\n", r.sold)
	fmt.Fprintf(w, "  stock left   %d   (sold + left = %d, want %d: %s)\n", r.left, r.sold+r.left, r.stock, check(r.sold+r.left == r.stock))
	fmt.Fprintf(w, "  oversold     %d   (%s)\n", r.oversold(), check(r.oversold() == 0))
	if r.rejected > 0 {
		fmt.Fprintf(w, "  rejected     %d stale writes (fencing token older than the storage had seen)\n", r.rejected)
	}
	var (
		per    []string
		counts []int
	)
	for wk := range r.procs {
		per = append(per, fmt.Sprintf("w%d=%d", wk, r.perWorker[wk]))
		counts = append(counts, r.perWorker[wk])
	}
	fmt.Fprintf(w, "  per worker   %s   (Jain's index %.3f; 1 is even)\n", strings.Join(per, " "), fairness.Jain(counts))
	fmt.Fprintf(w, "  throughput   %.0f orders/s (%v)\n", float64(r.sold)/r.elapsed.Seconds(), r.elapsed.Round(time.Millisecond))
	if r.locked && len(r.handoffs) > 0 {
		fmt.Fprintf(w, "  handoff      p50 %v  p99 %v\n", pct(r.handoffs, 0.50), pct(r.handoffs, 0.99))
	}
	if r.overlaps > 0 {
		fmt.Fprintf(w, "  overlapping  %d purchases began before the previous one ended\n", r.overlaps)
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Microsecond)
}
