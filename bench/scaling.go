package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Issue 16's measurements beyond scenarios 1-5: the handoff after a long
// hold across processes on the SQL stores, `dlock demo`'s fairness over
// processes, and the scaling charts (cost against the queue's length and
// against the locks a Locker holds) on every backend.

const kindWait = "wait"

// longHold is how long the holder keeps the lock in the long-hold
// handoff: longer than the SQL stores' longest poll backoff (250 ms) by
// enough that a polling waiter has reached it.
const longHold = 300 * time.Millisecond

// runWait is the worker's half of a long-hold handoff: open the store,
// call lock at StartNs (the holder has the name already), and report the
// acquisition as one event (Call, Acq, and Rel: when unlock was called).
func runWait(job hotJob) hotHalf {
	var out hotHalf
	lk, err := openJob(job)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
		return out
	}
	defer lk.close()
	time.Sleep(time.Until(time.Unix(0, job.StartNs)))
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, job.StopNs))
	defer cancel()
	call := time.Now()
	unlock, err := lk.lock(ctx, job.Name)
	acq := time.Now()
	if err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("lock: %v", err))
		return out
	}
	rel := time.Now()
	if err := unlock(context.Background()); err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("unlock: %v", err))
	}
	out.Events = []hotEvent{{Owner: 1, Call: call.UnixNano(), Acq: acq.UnixNano(), Rel: rel.UnixNano()}}
	return out
}

// longHoldHandoff takes a name on st in this process, has the worker
// process call Acquire on it 300 ms... before releasing: the worker calls
// at an agreed instant, and this process releases longHold after it. It
// returns the time from Release returning to the worker's Acquire
// returning (as sqllock's BenchmarkLongHoldHandoff measures within one
// process), in ns.
func (b *bench) longHoldHandoff(st store) (int64, error) {
	l := storeLib(st.name)
	lk, err := l.open(st.url, b.cfg.ttl)
	if err != nil {
		return 0, err
	}
	defer lk.close()
	ctx := context.Background()
	name := fmt.Sprintf("longhold:%d", time.Now().UnixNano())
	unlock, err := lk.lock(ctx, name)
	if err != nil {
		return 0, err
	}
	call := time.Now().Add(300 * time.Millisecond) // time for the worker to open its Locker
	job := hotJob{Kind: kindWait, Lib: l.key, Addr: st.url, Name: name,
		StartNs: call.UnixNano(), StopNs: call.Add(longHold + 30*time.Second).UnixNano(), TTL: b.cfg.ttl}
	var (
		half hotHalf
		werr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { half, werr = b.workers[0].run(job) })
	time.Sleep(time.Until(call.Add(longHold)))
	uerr := unlock(ctx)
	released := time.Now()
	wg.Wait()
	if err := errors.Join(uerr, werr); err != nil {
		return 0, err
	}
	if len(half.Errors) > 0 || len(half.Events) != 1 {
		return 0, fmt.Errorf("worker: %v", half.Errors)
	}
	return half.Events[0].Acq - released.UnixNano(), nil
}

// longHoldStores are the stores of the long-hold handoff: the polling ones
// of issue 16's targets, and PostgreSQL (LISTEN/NOTIFY) beside them.
var longHoldStores = []string{"SQLite", "MariaDB", "Postgres"}

// roundLongHold runs one long-hold handoff per store, interleaved.
func (b *bench) roundLongHold() {
	for _, st := range b.stores.list {
		if !slices.Contains(longHoldStores, st.name) {
			continue
		}
		d, err := b.longHoldHandoff(st)
		if err != nil {
			b.errorf("long-hold handoff %s: %v", st.name, err)
			continue
		}
		b.longHold[st.name] = append(b.longHold[st.name], d)
	}
}

// scaleWaiters are the waiter counts of the queue-length chart.
var scaleWaiters = []int{1, 10, 100, 1000}

// scaleProcs is how many processes the waiters are spread over.
const scaleProcs = 4

// scaleStores restricts the scaling charts to some stores, to measure
// one backend's change without running the others'.
var scaleStores = flag.String("scale-stores", "", "comma-separated stores of the scaling charts (Redis, MariaDB, Postgres, SQLite, ZooKeeper, etcd); empty: all. Each waiters point is also printed on stderr")

// fillWorkers is how many goroutines of one Locker take the held-locks
// runs' names.
var fillWorkers = flag.Int("fill-workers", 64, "held-locks chart and renewal runs: goroutines of the Locker that take the names")

// heldOnly runs the held-locks sections alone.
var heldOnly = flag.Bool("held-only", false, "run only the held-locks chart and the renewal runs (on -scale-stores), print their tables on stdout and write no report")

// scalingStores returns Redis (scenarios 1-4's server) and the other
// stores, each with its dlock lib and whether it is the Redis one; only
// those -scale-stores names, if set.
func (b *bench) scalingStores() []store {
	list := []store{{name: "Redis", url: b.addr}}
	if b.stores != nil {
		list = append(list, b.stores.list...)
	}
	if *scaleStores != "" {
		names := strings.Split(*scaleStores, ",")
		list = slices.DeleteFunc(list, func(st store) bool { return !slices.Contains(names, st.name) })
	}
	return list
}

func scaleLib(st store) lib {
	if st.name == "Redis" {
		return dlockLib(redisBackend{})
	}
	return storeLib(st.name)
}

// roundWaiters runs, on every store, a hot name with n waiters (n+1
// contenders, spread over up to scaleProcs processes) for each n of
// scaleWaiters.
func (b *bench) roundWaiters(round int) {
	for _, n := range scaleWaiters {
		for _, st := range b.scalingStores() {
			b.waitersPoint(st, n, round)
		}
	}
}

// waitersPoint runs one point of the waiters chart: n waiters on st. On
// MariaDB and PostgreSQL it records the server's connection counters
// around the run and the connections the clients saw refused.
func (b *bench) waitersPoint(st store, n, round int) {
	name := fmt.Sprintf("scale:%s:%d:%d", st.name, n, round)
	// 1,000 waiters take seconds to queue up on SQLite, ZooKeeper
	// and etcd (one write each): the steady window starts after
	// 2 ms per waiter.
	spec := spreadSpec{contenders: n + 1, procs: scaleProcs, d: b.cfg.scaleDur, settle: time.Duration(n) * 2 * time.Millisecond}
	sc := steadyCost{b: b, redis: st.name == "Redis"}
	spec.steady = sc.measure
	k := scaleKey(st.name, n)
	w := watchConns(b.i28.admins[st.name])
	f, halves, err := b.spreadFigures(scaleLib(st), st.url, name, spec)
	if werr := w.end(b.scaleW, k); werr != nil {
		b.errorf("waiters %s n=%d: %v", st.name, n, werr)
	}
	if err != nil {
		b.errorf("waiters %s n=%d: %v", st.name, n, err)
		return
	}
	if f.overlaps > 0 {
		b.errorf("waiters %s n=%d: %d acquisitions began before the previous holder called release (mutual exclusion broken?)", st.name, n, f.overlaps)
	}
	if w.a != nil {
		b.scaleW.add(k, mRefusedCli, float64(refusedErrors(halves)))
	}
	b.scaleW.add(k, mOps, f.rate)
	if len(f.handoffs) > 0 {
		b.scaleW.add(k, mHandP50, float64(percentile(f.handoffs, 50)))
		b.scaleW.add(k, mHandP99, float64(percentile(f.handoffs, 99)))
		if *scaleStores != "" {
			b.progress("waiters %s n=%d: handoff p50 %v p99 %v, %.0f acquisitions/s", st.name, n,
				time.Duration(percentile(f.handoffs, 50)), time.Duration(percentile(f.handoffs, 99)), f.rate)
		}
	}
	acqs, cpu := 0, time.Duration(0)
	for _, h := range halves {
		cpu += h.WindowCPU
		for _, e := range h.Events {
			if e.Acq >= sc.from.UnixNano() && e.Acq < sc.to.UnixNano() {
				acqs++
			}
		}
	}
	if acqs == 0 {
		return
	}
	b.scaleW.add(k, mCliCPU, float64(cpu)/float64(acqs))
	if st.name == "Redis" && sc.err == nil {
		b.scaleW.add(k, mSrvCPU, float64(sc.cpu)/float64(acqs))
		b.scaleW.add(k, mCmds, float64(sc.cmds.total())/float64(acqs))
	}
}

// steadyCost measures a spread run's steady window [from, to): on Redis,
// redis-server's CPU and commands run in it.
type steadyCost struct {
	b        *bench
	redis    bool
	from, to time.Time
	cpu      time.Duration
	cmds     cmdStats
	err      error
}

func (c *steadyCost) measure(from, to time.Time) {
	c.from, c.to = from, to
	if !c.redis {
		return
	}
	ctx := context.Background()
	time.Sleep(time.Until(from))
	cpu0, err0 := serverCPU(ctx, c.b.admin)
	cmd0, err1 := readCmdStats(ctx, c.b.admin)
	time.Sleep(time.Until(to))
	cpu1, err2 := serverCPU(ctx, c.b.admin)
	cmd1, err3 := readCmdStats(ctx, c.b.admin)
	if c.err = errors.Join(err0, err1, err2, err3); c.err == nil {
		c.cpu, c.cmds = cpu1-cpu0, cmd1.delta(cmd0)
	}
}

// spreadFigures runs a spread run of l on addr and computes its figures.
func (b *bench) spreadFigures(l lib, addr, name string, spec spreadSpec) (hotFigures, []hotHalf, error) {
	halves, job, err := b.runSpread(l, addr, name, spec)
	if err != nil {
		return hotFigures{}, nil, err
	}
	for _, h := range halves {
		for _, e := range h.Errors {
			b.errorf("%s on %s: %s", l.key, name, e)
		}
	}
	return computeHot(halves, spec.contenders, job.StartNs, job.StopNs, nil), halves, nil
}

func scaleKey(store string, n int) string { return store + "/" + strconv.Itoa(n) }

// scaleHeld are the held-lock counts of the held-locks chart.
var scaleHeld = []int{1, 10, 100, 1000, 10_000, 100_000}

// defaultHeldCaps is -scale-held-caps' default: where one Locker takes
// fewer names than -scale-held in a default run. On ZooKeeper and etcd
// each new name is several replicated writes (ZooKeeper: the failed
// create, the parent's, the child's): taking 100,000 took 641 s on
// ZooKeeper, and etcd's stopped at 20,561 on an acquisition's deadline,
// beside three other jobs on 2 cores (bench/README.md has that run's
// figures).
const defaultHeldCaps = "ZooKeeper=10000,etcd=10000"

// parseHeldCaps parses -scale-held-caps: store=n pairs, comma-separated.
func parseHeldCaps(s string) (map[string]int, error) {
	caps := map[string]int{}
	if s == "" {
		return caps, nil
	}
	for _, f := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 1 || !slices.Contains(append([]string{"Redis"}, storeNames...), name) {
			return nil, fmt.Errorf("%q is not store=n (n ≥ 1, store one of Redis, %s)", f, strings.Join(storeNames, ", "))
		}
		caps[name] = n
	}
	return caps, nil
}

// heldCap is the most locks one Locker takes on st in the held-locks
// chart and the renewal runs: -scale-held, or less if -scale-held-caps
// says so.
func (b *bench) heldCap(st string) int {
	if n, ok := b.cfg.heldCaps[st]; ok {
		return min(n, b.cfg.scaleHeld)
	}
	return b.cfg.scaleHeld
}

// heldScaling measures, on st, the uncontended acquire+release of one
// more name by a Locker already holding k locks, for each k of scaleHeld
// up to heldCap; the held locks have a 1 h lease (none is renewed during
// the run).
func (b *bench) heldScaling(st store) error {
	l := scaleLib(st)
	lk, err := l.open(st.url, time.Hour)
	if err != nil {
		return err
	}
	defer lk.close()
	ctx := context.Background()
	prefix := fmt.Sprintf("held:%d:", time.Now().UnixNano())
	hs := heldSet{lk: lk, workers: *fillWorkers}
	for _, k := range scaleHeld {
		if k > b.heldCap(st.name) {
			break
		}
		if err := hs.fill(k, func(i int) string { return fmt.Sprintf("%s%07d", prefix, i) }); err != nil {
			return fmt.Errorf("take %d locks: %w", k, err)
		}
		lat, err := cycleLoop(lk, prefix+"probe", b.cfg.scaleHeldDur, 20, func() {})
		if err != nil {
			return fmt.Errorf("cycle with %d held: %w", k, err)
		}
		key := scaleKey(st.name, k)
		b.scaleH.add(key, mP50, float64(percentile(lat, 50)))
		b.scaleH.add(key, mP99, float64(percentile(lat, 99)))
		b.scaleH.add(key, mMean, mean(lat))
		b.progress("held %s: cycle p50 %v p99 %v", key, time.Duration(percentile(lat, 50)), time.Duration(percentile(lat, 99)))
	}
	if st.name == "Redis" { // Close releases each lock: let it find none
		return b.admin.FlushAll(ctx).Err()
	}
	return hs.release()
}

// demoJain matches the Jain index in `dlock demo`'s summary.
var demoJain = regexp.MustCompile(`Jain[^0-9\n]*([0-9]+(?:\.[0-9]+)?)`)

// runDemo builds the dlock command and runs `dlock demo` on its default
// store (SQLite, in a temporary state directory) b.cfg.demoRuns times,
// recording the Jain index its summary prints (NaN when it prints none)
// and its "per worker" line.
func (b *bench) runDemo() error {
	dir, err := os.MkdirTemp("", "dlock-bench-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "dlock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "cmd", "dlock") // a module of its own
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in cmd/dlock: %v\n%s", err, tail(string(out), 10))
	}
	for i := range b.cfg.demoRuns {
		// dlock creates its default store's directory only below an
		// existing $XDG_STATE_HOME (it exits 64 otherwise).
		state := filepath.Join(dir, fmt.Sprintf("state%d", i))
		if err := os.Mkdir(state, 0o700); err != nil {
			return err
		}
		cmd := exec.Command(bin, "demo")
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "DLOCK_STORE=")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("dlock demo: %v\n%s", err, tail(out.String(), 10))
		}
		v := math.NaN()
		if m := demoJain.FindStringSubmatch(out.String()); m != nil {
			v, _ = strconv.ParseFloat(m[1], 64)
		}
		b.demo.add("demo", mJain, v)
		b.demoOut = out.String()
	}
	return nil
}

// runIssue16 runs issue 16's sections after scenarios 1-4: it starts the
// other stores (idle servers would have loaded the machine during the
// Redis scenarios), runs the long-hold handoffs, the demo and the scaling
// charts, and stops the stores. The stores' servers die with this process
// if it is interrupted.
func (b *bench) runIssue16() error {
	c := b.cfg
	if c.stores && (c.longHoldRuns > 0 || c.scaling) {
		b.progress("starting MariaDB, PostgreSQL, ZooKeeper, etcd (dlock's test harness)")
		b.stores, b.storesErr = startStores()
		defer b.stores.stop()
		if b.storesErr != nil {
			b.errorf("stores: %v", b.storesErr)
		}
	}
	if b.stores != nil {
		for i := range c.longHoldRuns {
			b.progress("long-hold handoff %d/%d: %v hold, waiter in another process", i+1, c.longHoldRuns, longHold)
			b.roundLongHold()
		}
	}
	if c.demoRuns > 0 {
		b.progress("dlock demo on its default store, %d run(s)", c.demoRuns)
		if b.demoErr = b.runDemo(); b.demoErr != nil {
			b.errorf("demo: %v", b.demoErr)
		}
	}
	if !c.scaling {
		return nil
	}
	b.openAdmins()
	defer b.closeAdmins()
	for r := range c.scaleRounds {
		b.progress("scaling %d/%d: handoff against %v waiters over %d processes", r+1, c.scaleRounds, scaleWaiters, scaleProcs)
		b.roundWaiters(r)
		b.progress("scaling %d/%d: default connection limits, %d processes", r+1, c.scaleRounds, limitProcs)
		b.roundLimits()
	}
	b.runHeld()
	return nil
}

// runHeld runs, on every store, the held-locks chart and the renewal
// runs.
func (b *bench) runHeld() {
	for _, st := range b.scalingStores() {
		b.progress("scaling: %s cycle against locks held (up to %d)", st.name, b.heldCap(st.name))
		if err := b.heldScaling(st); err != nil {
			b.errorf("held locks %s: %v", st.name, err)
		}
		b.progress("scaling: %s renewal batches of locks held (up to %d)", st.name, b.heldCap(st.name))
		if err := b.renewalScaling(st, false); err != nil {
			b.errorf("renewal %s: %v", st.name, err)
		}
		if slices.Contains(renewSharedStores, st.name) {
			b.progress("scaling: %s renewal batches of shared holds (up to %d)", st.name, b.heldCap(st.name))
			if err := b.renewalScaling(st, true); err != nil {
				b.errorf("renewal %s shared holds: %v", st.name, err)
			}
		}
	}
}

// runHeldOnly is the run of -held-only: the held-locks chart and the
// renewal runs on the stores, their tables on stdout.
func (b *bench) runHeldOnly() error {
	if b.cfg.stores {
		b.progress("starting MariaDB, PostgreSQL, ZooKeeper, etcd (dlock's test harness)")
		b.stores, b.storesErr = startStores()
		defer b.stores.stop()
		if b.storesErr != nil {
			b.errorf("stores: %v", b.storesErr)
		}
	}
	b.openAdmins()
	defer b.closeAdmins()
	b.runHeld()
	var out strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&out, format, a...) }
	b.writeHeld(p, b.scalingStores())
	p("\n")
	b.writeRenewal(p)
	_, err := os.Stdout.WriteString(out.String())
	return err
}
