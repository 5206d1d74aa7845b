package jepsen

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// Workers are the suite's worker processes: a test package that runs the
// suite passes them to testworker.Run in its TestMain.
var Workers = map[string]testworker.Func{
	"jepsen-register": Register,
	"jepsen-worker":   Worker,
	"jepsen-workers":  inProcessWorkers,
	"jepsen-shared":   sharedWorkers,
	"jepsen-leader":   Leader,
}

// Server is a store's server, for the nemeses that fault it.
type Server interface {
	Pause(t testing.TB)
	Resume(t testing.TB)
	Restart(t testing.TB)
}

// Target is a store to put through the suite.
type Target struct {
	Name string
	// URL returns the store URL workers open (with the store's backend
	// imported by the test package), reaching the server at addr: a
	// proxy's address for network faults, or Upstream.
	URL func(addr string) string
	// Upstream is the server's address, which each worker reaches through
	// a fault proxy of its own; "" for a store without a network (SQLite).
	// A store with several servers lists the one the proxies front.
	Upstream string
	// Server is the store's server, or nil when it has none (SQLite).
	Server Server
	// Shared, when above 1, runs that many workers in each worker process
	// as goroutines sharing one Locker (Options.Workers processes), so
	// that a Locker has several waiters of the name at once (redislock's
	// lines). The faults that take a worker away (kill, pause, stall) take
	// its process, with the workers it shares; a partition or a dropped
	// reply cuts the process's proxy.
	Shared int
	// InProcess runs every worker as a goroutine of one process (memlock,
	// whose store is one process's memory); only the nemesis "none"
	// applies.
	InProcess bool
	// Failover promotes a replica to master, for the failover nemesis;
	// nil when the store has no replicas.
	Failover func(t testing.TB)
	// DeadHolderLease is how long the lock of a holder that died can
	// outlive it: the TTL (the default), or the session timeout of a
	// store whose locks live in a session (ZooKeeper, etcd).
	DeadHolderLease time.Duration
	// Forgets lists the nemeses under which the store may lose its
	// locks (a Redis without persistence restarted empty): overlapping
	// beliefs are then expected, and fencing must make them harmless.
	Forgets []string
	// Clocks are the wall clocks of the store's servers, which the clock
	// nemeses step; nil for a store without one the suite can step. A
	// store with several servers whose clocks are independent (Redlock)
	// has one per server, the first being that of Server.
	Clocks []*testserver.Clock
	// SQLiteClock, when set, is also Clocks[0]: the store is SQLite, whose
	// clock is the workers' own, and each worker process puts SQLite on
	// it (see useSQLiteClock).
	SQLiteClock bool
	// InvertsTokens lists the nemeses under which the store may hand out
	// a token below one it handed out before (Redis without persistence
	// restarted after its clock stepped back: the one documented
	// condition): token inversions are then counted apart, not as
	// violations.
	InvertsTokens []string
}

// Options sizes a run. Zero fields take the short mode's values.
type Options struct {
	Workers  int           // worker processes; default 3
	TTL      time.Duration // lease; default 1s
	Duration time.Duration // before and after the fault, each; default 1s
	// Limit, when above 0, makes the workers take permits of a semaphore
	// of Limit instead of the lock, without register operations: the
	// checkers then allow Limit holders at once and want a fence each.
	Limit int
	// Nemeses, when not empty, restricts RunAll to the nemeses named.
	Nemeses []string
}

func (o Options) withDefaults() Options {
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.TTL == 0 {
		o.TTL = time.Second
	}
	if o.Duration == 0 {
		o.Duration = time.Second
	}
	return o
}

// Cluster is a run in progress: the register, the workers and the faults
// injected so far. Nemeses use it.
type Cluster struct {
	T       testing.TB
	Target  Target
	Options Options

	regAddr string
	paths   []string // the workers' histories
	workers []*testworker.Process
	proxies []*testserver.Proxy // per worker process, when the target has a network
	per     int                 // workers per process (see Target.Shared)

	mu     sync.Mutex
	deaths map[int]int64
	pauses []pause
	events []string // what the nemesis did, for the report
}

// Holder waits until a worker says it holds the lock and returns its
// number.
func (c *Cluster) Holder() int {
	c.T.Helper()
	n := c.holderWithin(30 * time.Second)
	if n < 0 {
		c.T.Fatalf("no worker held the lock for 30s")
	}
	return n
}

// holderWithin waits up to d until a worker says it holds the lock and
// returns its number, or -1.
func (c *Cluster) holderWithin(d time.Duration) int {
	c.T.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + c.regAddr + "/?kind=holder")
		if err != nil {
			c.T.Fatalf("ask the register for the holder: %v", err)
		}
		n, pid := -1, 0
		fmt.Fscan(resp.Body, &n, &pid)
		resp.Body.Close()
		if n >= 0 {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return -1
}

// Waiter waits until a worker other than the holder is in Acquire and
// returns its number, or -1 if none is within 30 s.
func (c *Cluster) Waiter() int {
	c.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + c.regAddr + "/?kind=waiter")
		if err != nil {
			c.T.Fatalf("ask the register for a waiter: %v", err)
		}
		n := -1
		fmt.Fscan(resp.Body, &n)
		resp.Body.Close()
		if n >= 0 {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return -1
}

// proc returns the index of worker n's process (in workers and proxies).
func (c *Cluster) proc(n int) int { return n / c.per }

// mates returns the workers of worker n's process, n among them.
func (c *Cluster) mates(n int) []int {
	var ms []int
	for m := c.proc(n) * c.per; m < min((c.proc(n)+1)*c.per, len(c.paths)); m++ {
		ms = append(ms, m)
	}
	return ms
}

// Kill kills worker n's process with SIGKILL (and the workers it shares).
func (c *Cluster) Kill(n int) {
	c.workers[c.proc(n)].Kill(c.T)
	c.mu.Lock()
	defer c.mu.Unlock()
	died := now()
	for _, m := range c.mates(n) {
		c.deaths[m] = died
	}
	c.events = append(c.events, fmt.Sprintf("killed worker %d", n))
}

// Pause stops worker n's process with SIGSTOP for d, then continues it.
func (c *Cluster) Pause(n int, d time.Duration) {
	stop := now()
	c.workers[c.proc(n)].Signal(c.T, syscall.SIGSTOP)
	time.Sleep(d)
	c.workers[c.proc(n)].Signal(c.T, syscall.SIGCONT)
	c.mu.Lock()
	defer c.mu.Unlock()
	cont := now()
	for _, m := range c.mates(n) {
		c.pauses = append(c.pauses, pause{worker: m, stop: stop, cont: cont})
	}
	c.events = append(c.events, fmt.Sprintf("paused worker %d for %v", n, d))
}

// pastLease is how long to pause a holder for its lease to run out for
// sure: twice the TTL, or a TTL past a session that outlives it.
func (c *Cluster) pastLease() time.Duration {
	return max(2*c.Options.TTL, c.Target.DeadHolderLease+c.Options.TTL)
}

// fault applies inject to proxies, waits d, and heals them.
func (c *Cluster) fault(d time.Duration, inject func(*testserver.Proxy), proxies ...*testserver.Proxy) {
	for _, p := range proxies {
		inject(p)
	}
	time.Sleep(d)
	for _, p := range proxies {
		p.Heal(c.T)
	}
}

// Nemesis injects one fault, bounded in time.
type Nemesis struct {
	Name string
	Run  func(c *Cluster)
}

// Nemeses are the faults every target goes through; those that need a
// server are skipped, and said so, for a target without one.
var Nemeses = []Nemesis{
	{"none", func(c *Cluster) {}},
	{"kill-holder", func(c *Cluster) { c.Kill(c.Holder()) }},
	{"pause-holder", func(c *Cluster) { c.Pause(c.Holder(), c.pastLease()) }},
	{"pause-server", func(c *Cluster) {
		c.Target.Server.Pause(c.T)
		time.Sleep(2 * c.Options.TTL)
		c.Target.Server.Resume(c.T)
	}},
	{"restart-server", func(c *Cluster) { c.Target.Server.Restart(c.T) }},
	{"failover", func(c *Cluster) { c.Target.Failover(c.T) }},
	{"stall-holder", func(c *Cluster) {
		// SIGSTOP the holder between its read and its write, past the
		// TTL: on resume its write carries a fence older than the next
		// holder's, and only fencing stands between it and the data.
		n := c.Holder()
		stall := c.paths[n] + ".stall"
		if err := os.WriteFile(stall, nil, 0o644); err != nil {
			c.T.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(stall); err != nil {
				c.Pause(n, c.pastLease()) // taken: it is between read and write
				return
			}
		}
		c.T.Fatalf("worker %d did not reach its write within 30 s", n)
	}},
	{"partition-holder", func(c *Cluster) {
		c.fault(2*c.Options.TTL, func(p *testserver.Proxy) { p.Partition(c.T) }, c.proxies[c.proc(c.Holder())])
	}},
	{"partition-all", func(c *Cluster) {
		c.fault(2*c.Options.TTL, func(p *testserver.Proxy) { p.Partition(c.T) }, c.proxies...)
	}},
	{"drop-replies", func(c *Cluster) {
		c.fault(2*c.Options.TTL, func(p *testserver.Proxy) { p.DropReplies(c.T) }, c.proxies[c.proc(c.Holder())])
	}},
	{"latency", func(c *Cluster) {
		c.fault(2*c.Options.TTL, func(p *testserver.Proxy) { p.Latency(c.T, c.Options.TTL/10) }, c.proxies...)
	}},
	{"reset-connections", func(c *Cluster) {
		for _, p := range c.proxies {
			p.ResetConnections(c.T)
		}
	}},
	{"partition-waiter", func(c *Cluster) {
		// Cut a worker off right after it has queued, for longer than
		// the TTL, then heal: the stale-grant case.
		c.Holder()
		n := c.Waiter()
		if n < 0 {
			c.T.Fatalf("no worker waited for the lock within 30 s")
		}
		time.Sleep(c.Options.TTL / 20) // its queued attempt has been answered
		c.fault(2*c.Options.TTL, func(p *testserver.Proxy) { p.Partition(c.T) }, c.proxies[c.proc(n)])
	}},
	{"late-grant", func(c *Cluster) {
		// A waiter's link is held (not dropped) right after its queued
		// call, past a grant's lease (redislock's is 2 s) and the TTL,
		// then runs 100 ms slow for a second: whatever the store sent it
		// meanwhile (a grant) arrives late (issue 23, finding 1).
		c.Holder()
		n := c.Waiter()
		if n < 0 {
			c.T.Fatalf("no worker waited for the lock within 30 s")
		}
		time.Sleep(c.Options.TTL / 20) // its queued attempt has been answered
		p := c.proxies[c.proc(n)]
		p.Partition(c.T)
		time.Sleep(max(3*time.Second, 3*c.Options.TTL))
		p.Heal(c.T)
		p.Latency(c.T, 100*time.Millisecond)
		time.Sleep(time.Second)
		p.Heal(c.T)
		c.event(fmt.Sprintf("held worker %d's link for %v, then 100 ms slow for 1s", n, max(3*time.Second, 3*c.Options.TTL)))
	}},
	// The store's wall clock steps (see StepClocks), last: a store that a
	// step leaves confused (a Redlock master's state) would otherwise
	// blame the nemeses after it. The steps are permanent for the rest
	// of the run (an undo would be a step the other way, the opposite
	// nemesis); Run puts the clocks back once the workers have stopped. Each run's TTL (1 s) is below the 5 s steps, so a forward
	// step ends every lease at once by the store's clock; 10 s is
	// driver.DefaultClockBound.
	{"clock-forward-5s", func(c *Cluster) { c.StepClocks(5*time.Second, false) }},
	{"clock-back-5s", func(c *Cluster) { c.StepClocks(-5*time.Second, false) }},
	{"clock-forward-10s", func(c *Cluster) { c.StepClocks(driver.DefaultClockBound, false) }},
	{"clock-back-10s", func(c *Cluster) { c.StepClocks(-driver.DefaultClockBound, false) }},
	{"clock-back-restart-server", func(c *Cluster) {
		// A step back, then a restart: a store without persistence comes
		// back empty, and any token taken from its clock is below the
		// last ones handed out.
		c.Holder()
		for _, k := range c.Target.Clocks {
			k.Step(-5 * time.Second)
		}
		c.event("stepped the clock(s) by -5s")
		c.Target.Server.Restart(c.T)
		c.event("restarted the server")
	}},
	// Last of all: on Redlock, the state of the master it steps outlives
	// the run (the clock put back is a step back of that master).
	{"clock-one-forward-5s", func(c *Cluster) { c.StepClocks(5*time.Second, true) }},
}

func needsServer(name string) bool { return strings.HasSuffix(name, "-server") }

func needsNetwork(name string) bool {
	return strings.HasPrefix(name, "partition-") || name == "drop-replies" || name == "latency" || name == "reset-connections" || name == "late-grant"
}

func needsClock(name string) bool { return strings.HasPrefix(name, "clock-") }

// needsClocks is how many independent clocks a nemesis needs.
func needsClocks(name string) int {
	if name == "clock-one-forward-5s" {
		return 2
	}
	return 1
}

// StepClocks steps the store's wall clocks by d, clockSteps times, each
// while a worker holds the lock and two TTLs after the last, so that every
// lease was written after at most one step: each step is one of at most
// d (the promise covers a step at any moment), and each finds a holder
// whose lease it shortens or lengthens (one step finds a waiter trying in
// the holder's remaining time only now and then). It steps every clock,
// or only the last (one server of several, e.g. one Redlock master) if
// one is set. The steps stay: Run puts the clocks back after the workers
// have stopped.
func (c *Cluster) StepClocks(d time.Duration, one bool) {
	clocks := c.Target.Clocks
	if one {
		// The last server's: not Server, which the other nemeses
		// restart, so its state is as old as any other's.
		clocks = clocks[len(clocks)-1:]
	}
	for i := range clockSteps {
		if i > 0 {
			time.Sleep(2 * c.Options.TTL)
		}
		// A store a step made unavailable is stepped again all the
		// same; the progress checker reports it.
		if c.holderWithin(5*time.Second) < 0 {
			c.event("nobody held the lock 5s before a step")
		}
		for _, k := range clocks {
			k.Step(d)
		}
	}
	c.event(fmt.Sprintf("stepped %d clock(s) by %v, %d times", len(clocks), d, clockSteps))
	// Past every lease written before the last step: the takeovers it
	// may allow happen within the fault.
	time.Sleep(2 * c.Options.TTL)
}

// clockSteps is how many times a clock nemesis steps the clock.
const clockSteps = 3

func (c *Cluster) event(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, s)
}

// Result is one run's figures, for the report.
type Result struct {
	Target, Nemesis string
	Duration        time.Duration
	Acquisitions    int
	Accepted        int // register writes accepted
	Rejected        int // register operations refused for a stale fence
	Ops             int // register operations checked for linearizability
	Violations      []string
	MaxStale        time.Duration // longest stale belief after its worker resumed
	MaxReacquire    time.Duration // after a holder was killed, until another worker held the lock
	Overlaps        int           // overlapping beliefs fencing made harmless (paused or forgetful store)
	Linearizable    string        // porcupine's verdict on the register history
	// TokenInversions counts acquisitions whose fence was not above that
	// of one that ended before they began (violations);
	// ExpectedInversions counts them under the documented exception
	// (Target.InvertsTokens).
	TokenInversions, ExpectedInversions int
}

// Run puts target through nemesis and checks the histories. It fails t on
// any violation and returns the figures.
func Run(t *testing.T, target Target, nemesis Nemesis, opts Options) Result {
	t.Helper()
	opts = opts.withDefaults()
	dir := t.TempDir()
	began := now()
	reg := testworker.Start(t, "jepsen-register", filepath.Join(dir, "register.jsonl"))
	c := &Cluster{T: t, Target: target, Options: opts, deaths: map[int]int64{}, per: 1}
	if target.Shared > 1 {
		c.per = target.Shared
	}
	// Put stepped clocks back for the next run even if this one stops
	// early (see below for the usual case).
	t.Cleanup(func() {
		for _, k := range target.Clocks {
			k.Step(-k.Offset())
		}
	})
	c.regAddr = reg.Expect(t, "listening", 30*time.Second)
	var paths []string
	for n := range opts.Workers * c.per {
		paths = append(paths, filepath.Join(dir, "worker"+strconv.Itoa(n)+".jsonl"))
	}
	c.paths = paths
	if target.InProcess {
		// One process runs every worker, as goroutines sharing its store.
		c.workers = []*testworker.Process{testworker.Start(t, "jepsen-workers",
			append([]string{target.URL(""), c.regAddr, "jepsen", opts.TTL.String(), strconv.Itoa(opts.Limit)}, paths...)...)}
		for range paths {
			c.workers[0].Expect(t, "ready", 30*time.Second)
		}
	} else {
		for n := 0; n < len(paths); n += c.per {
			addr := target.Upstream
			if addr != "" {
				p := testserver.StartProxy(t, target.Upstream)
				c.proxies = append(c.proxies, p)
				addr = p.Addr()
			}
			if c.per > 1 {
				args := []string{target.URL(addr), c.regAddr, "jepsen", opts.TTL.String(), strconv.Itoa(opts.Limit), strconv.Itoa(n)}
				c.workers = append(c.workers, testworker.Start(t, "jepsen-shared", append(args, paths[n:min(n+c.per, len(paths))]...)...))
				continue
			}
			args := []string{target.URL(addr), c.regAddr, "jepsen", opts.TTL.String(), paths[n], strconv.Itoa(n), strconv.Itoa(opts.Limit)}
			if target.SQLiteClock {
				args = append(args, target.Clocks[0].File())
			}
			c.workers = append(c.workers, testworker.Start(t, "jepsen-worker", args...))
		}
		for _, w := range c.workers {
			w.Expect(t, "ready", 30*time.Second)
		}
	}
	time.Sleep(opts.Duration)
	nemesis.Run(c)
	healed := now()
	time.Sleep(opts.Duration)
	// Run on until every live worker has acquired since the fault ended
	// (a liveness check, so bounded generously), then stop.
	for deadline := time.Now().Add(progressBound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		all := true
		for n := range paths {
			if _, dead := c.deaths[n]; !dead && !acquiredAfter(t, paths[n], healed) {
				all = false
			}
		}
		if all {
			break
		}
	}
	for p, w := range c.workers {
		if _, dead := c.deaths[p*c.per]; !dead {
			w.Signal(t, syscall.SIGTERM)
		}
	}
	for p, w := range c.workers {
		if _, dead := c.deaths[p*c.per]; !dead {
			if err := w.Wait(t, 30*time.Second); err != nil {
				t.Errorf("worker process %d exited with %v; stderr:\n%s", p, err, w.Stderr())
			}
		}
	}
	runEnd := now()
	reg.Signal(t, syscall.SIGTERM)
	reg.Wait(t, 10*time.Second)
	// Put the stepped clocks back for the next run, now that no worker
	// holds or waits (this is a step too, with nobody to see it).
	for _, k := range target.Clocks {
		k.Step(-k.Offset())
	}

	o, err := check(paths, filepath.Join(dir, "register.jsonl"), c.deaths, c.pauses, runEnd,
		slices.Contains(target.Forgets, nemesis.Name), slices.Contains(target.InvertsTokens, nemesis.Name), opts.Limit)
	if err != nil {
		t.Fatalf("read the histories: %v", err)
	}
	res := Result{Target: target.Name, Nemesis: nemesis.Name, Duration: time.Duration(runEnd - began),
		Acquisitions: o.acquisitions, Accepted: o.accepted, Rejected: o.rejected, Ops: o.ops,
		Violations: o.violations, MaxStale: o.maxStale, Overlaps: o.overlaps, Linearizable: string(o.linearizable),
		TokenInversions: o.inversions, ExpectedInversions: o.expectedInversions}
	if o.expectedInversions > 0 {
		t.Logf("%s under %s: %d token inversions, expected (documented exception)", target.Name, nemesis.Name, o.expectedInversions)
	}

	// Every worker still alive acquires again after the fault.
	stuck, err := unprogressed(paths, c.deaths, healed)
	if err != nil {
		t.Fatalf("read the histories: %v", err)
	}
	for _, n := range stuck {
		res.Violations = append(res.Violations, fmt.Sprintf("worker %d never acquired in the %v after the fault ended", n, opts.Duration+progressBound))
	}
	// After a holder was killed, the next holder came after its lease
	// could have ended, and within TTL plus a margin.
	for n, died := range c.deaths {
		next, ok := firstHeldAfter(t, paths, n, died)
		if !ok {
			res.Violations = append(res.Violations, fmt.Sprintf("nobody acquired after worker %d was killed", n))
			continue
		}
		wait := time.Duration(next - died)
		res.MaxReacquire = max(res.MaxReacquire, wait)
		lease := target.DeadHolderLease
		if lease == 0 {
			lease = opts.TTL
		}
		if wait > lease+reacquireMargin {
			res.Violations = append(res.Violations, fmt.Sprintf("the lock was held again %v after its holder was killed, want within its lease %v + %v", wait, lease, reacquireMargin))
			logBetween(t, paths, died, next)
		}
		// Nor before its lease could have ended: the server granted it
		// no earlier than the Acquire call, for at least the TTL. (Other
		// permits of a semaphore may be taken meanwhile.)
		if called, holding := lastHeldCall(t, paths[n]); opts.Limit == 0 && holding && next < called+int64(opts.TTL) {
			res.Violations = append(res.Violations, fmt.Sprintf("the lock was held again %v after the killed holder's Acquire was called, before its %v lease could have ended",
				time.Duration(next-called), opts.TTL))
		}
	}
	if o.linearizable == porcupine.Illegal {
		if f, err := os.CreateTemp("", "dlock-jepsen-*.html"); err == nil {
			porcupine.Visualize(registerModel.ToModel(), o.info, f)
			f.Close()
			t.Logf("linearizability visualisation: %s", f.Name())
		}
	}
	for _, v := range res.Violations {
		t.Errorf("%s under %s: %s", target.Name, nemesis.Name, v)
	}
	t.Logf("%s / %s: %d acquisitions, %d writes accepted, %d refused, %d ops linearizable=%s, %d fenced overlaps, %d token inversions (%d expected), max stale %v, max re-acquire %v; %s",
		target.Name, nemesis.Name, res.Acquisitions, res.Accepted, res.Rejected, res.Ops, o.linearizable, res.Overlaps, res.TokenInversions, res.ExpectedInversions, res.MaxStale, res.MaxReacquire, strings.Join(c.events, ", "))
	return res
}

// progressBound is how long past Duration a run goes on for every live
// worker to acquire once after the fault.
const progressBound = 30 * time.Second

// reacquireMargin is how long after a dead holder's TTL another worker
// may take to acquire: the waiters' retry bound plus scheduling on a busy
// machine.
const reacquireMargin = 3 * time.Second

func acquiredAfter(t testing.TB, path string, at int64) bool {
	evs, err := readLines[event](path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	for _, e := range evs {
		if e.Ev == "held" && e.T > at {
			return true
		}
	}
	return false
}

// lastHeldCall returns when the worker with history path called Acquire
// for its last acquisition, and whether it still held that lock when its
// history ends (it was killed holding it).
func lastHeldCall(t testing.TB, path string) (called int64, holding bool) {
	evs, err := readLines[event](path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	calls := map[int]int64{}
	for _, e := range evs {
		switch e.Ev {
		case "acquire":
			calls[e.Acq] = e.T
		case "held":
			called, holding = calls[e.Acq], true
		case "end":
			holding = false
		}
	}
	return called, holding
}

func firstHeldAfter(t testing.TB, paths []string, except int, at int64) (int64, bool) {
	first, ok := int64(0), false
	for n, p := range paths {
		if n == except {
			continue
		}
		evs, err := readLines[event](p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		for _, e := range evs {
			if e.Ev == "held" && e.T > at && (!ok || e.T < first) {
				first, ok = e.T, true
				break
			}
		}
	}
	return first, ok
}

// logBetween logs every worker's events from from to to (monotonic ns),
// at most maxLogged of them, with times relative to from: what the
// workers did while nobody took the lock.
func logBetween(t testing.TB, paths []string, from, to int64) {
	t.Helper()
	var evs []event
	for _, p := range paths {
		es, err := readLines[event](p)
		if err != nil {
			t.Logf("read %s: %v", p, err)
			continue
		}
		for _, e := range es {
			if e.T >= from && e.T <= to {
				evs = append(evs, e)
			}
		}
	}
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.T, b.T) })
	if len(evs) > maxLogged {
		t.Logf("the first %d of %d events while nobody took the lock:", maxLogged, len(evs))
		evs = evs[:maxLogged]
	}
	for _, e := range evs {
		t.Logf("  +%v worker %d acq %d %s %s", time.Duration(e.T-from).Round(time.Millisecond), e.Worker, e.Acq, e.Ev, e.Why)
	}
}

// maxLogged bounds the events logBetween logs.
const maxLogged = 60

// RunAll puts target through every nemesis that applies to it, and says
// which do not (no subtest is made for those: nothing is skipped as if it
// had passed).
func RunAll(t *testing.T, target Target, opts Options) []Result {
	var results []Result
	var na []string
	for _, nem := range Nemeses {
		if len(opts.Nemeses) > 0 && !slices.Contains(opts.Nemeses, nem.Name) {
			continue
		}
		if needsServer(nem.Name) && target.Server == nil || needsNetwork(nem.Name) && target.Upstream == "" ||
			needsClock(nem.Name) && len(target.Clocks) < needsClocks(nem.Name) ||
			nem.Name == "failover" && target.Failover == nil || target.InProcess && nem.Name != "none" {
			na = append(na, nem.Name)
			continue
		}
		t.Run(nem.Name, func(t *testing.T) {
			results = append(results, Run(t, target, nem, opts))
		})
	}
	if len(na) > 0 {
		t.Logf("%s: not applicable (no server process, no proxied network, no replica or no clock to step): %s", target.Name, strings.Join(na, ", "))
	}
	return results
}

var _ = context.Background
