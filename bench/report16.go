package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// Targets for dlock from issue 16.
const (
	target16HotRatio   = 1.2   // hot acquisitions/s / hand-written's, at least
	target16Jain       = 0.99  // at least, with the above
	target16MaxWait    = 20e6  // ns, at most, with the above
	target16Cmds       = 10.0  // Redis commands per hot acquisition, at most
	target16SrvCPU     = 1.0   // redis-server CPU per hot acquisition / hand-written's, at most
	target16Distinct   = 1.5   // 64 goroutines / hand-written, median, at least
	target16DistinctLo = 1.3   // ... worst round, at least
	target16Bytes      = 160.0 // per held lock, at most
	target16SQLite     = 5e6   // ns: SQLite long-hold handoff p50, at most
	target16MySQL      = 20e6  // ns: MariaDB long-hold handoff p50, at most
	target16DemoJain   = 0.9   // `dlock demo` Jain over processes, at least
	target16Etcd       = 4.0   // read-ping round trips per uncontended cycle, at most
	target16ZooKeeper  = 5.0   // ditto
	chartScaleHandoff  = "scale-handoff.svg"
	chartScaleCPU      = "scale-cpu.svg"
	chartScaleHeld     = "scale-held.svg"
)

// verdictOf is a target line's verdict: N/A without a figure.
func verdictOf(ok bool, s spread) string {
	switch {
	case s.n == 0 || math.IsNaN(s.med):
		return "N/A"
	case ok:
		return "PASS"
	}
	return "MISS"
}

// perRound returns a[i]/b[i] for the rounds both have.
func perRound(a, b []float64) spread {
	var r []float64
	for i := range min(len(a), len(b)) {
		r = append(r, a[i]/b[i])
	}
	return spreadOf(r)
}

func int64s(xs []int64) []float64 {
	f := make([]float64, len(xs))
	for i, x := range xs {
		f[i] = float64(x)
	}
	return f
}

// backendMetric returns scenario 5's unit of sub-benchmark sub for the
// backend named name, and whether it was measured.
func (b *bench) backendMetric(name, sub, unit string) (float64, bool) {
	for _, bk := range b.backends {
		if bk.name == name {
			v, ok := bk.metrics[sub][unit]
			return v, ok
		}
	}
	return 0, false
}

// hotTarget is the hot-name target line: acquisitions/s at least ratio
// times the hand-written 1 ms poller's, with Jain's index and max wait
// bounded.
func (b *bench) hotTarget(ratio float64) target {
	r := perRound(b.s3[keyDlock][mOps], b.s3[keyHand][mOps])
	jd, jh := b.s3.get(keyDlock, mJain), b.s3.get(keyHand, mJain)
	wd, wh := b.s3.get(keyDlock, mWaitMax), b.s3.get(keyHand, mWaitMax)
	return target{verdictOf(r.med >= ratio && jd.med >= target16Jain && wd.med <= target16MaxWait, r),
		fmt.Sprintf("hot name: acquisitions/s ≥ %.1f× the hand-written 1 ms poller's, with Jain ≥ 0.99 and max wait ≤ 20 ms", ratio),
		fmt.Sprintf("dlock %s (%s vs %s acquisitions/s); Jain dlock %s, hand-written %s; max wait dlock %s, hand-written %s",
			r.format(fRatio), b.s3.get(keyDlock, mOps).format(fInt), b.s3.get(keyHand, mOps).format(fInt),
			jd.format(f3), jh.format(f3), wd.format(fDur), wh.format(fDur))}
}

// cpuTarget is the target line of redis-server CPU per hot acquisition
// against the hand-written lock's.
func (b *bench) cpuTarget() target {
	s := perRound(b.s3[keyDlock][mSrvCPU], b.s3[keyHand][mSrvCPU])
	return target{verdictOf(s.med <= target16SrvCPU, s),
		"hot name: redis-server CPU per acquisition ≤ 1.0× the hand-written lock's",
		fmt.Sprintf("%s (dlock %s, hand-written %s per acquisition)", s.format(fRatio),
			b.s3.get(keyDlock, mSrvCPU).format(fDur), b.s3.get(keyHand, mSrvCPU).format(fDur))}
}

// memoryTarget is the target line of memory per held lock, at most limit
// bytes (section 4's figure, net of the clients' connection memory).
func (b *bench) memoryTarget(limit float64) target {
	s := b.s4.get(keyDlock, mBytes)
	return target{verdictOf(s.med <= limit, s),
		fmt.Sprintf("Redis memory ≤ %.0f B per held lock, fence included (section 4)", limit),
		fmt.Sprintf("dlock %s B; hand-written %s, redsync %s, bsm/redislock %s; used_memory growth alone: dlock %s, hand-written %s, redsync %s, bsm/redislock %s",
			s.format(f1), b.s4.get(keyHand, mBytes).format(f1), b.s4.get(keyRedsync, mBytes).format(f1), b.s4.get(keyBsm, mBytes).format(f1),
			b.s4.get(keyDlock, mBytesUsed).format(f1), b.s4.get(keyHand, mBytesUsed).format(f1), b.s4.get(keyRedsync, mBytesUsed).format(f1), b.s4.get(keyBsm, mBytesUsed).format(f1))}
}

func (b *bench) targets16() []target {
	var ts []target
	add := func(what string, s spread, ok bool, measured string) {
		ts = append(ts, target{verdictOf(ok, s), what, measured})
	}

	ts = append(ts, b.hotTarget(target16HotRatio))

	s := b.s3.get(keyDlock, mCmds)
	add("hot name: ≤ 10 Redis commands per acquisition (INFO commandstats, inside scripts included)", s, s.med <= target16Cmds,
		fmt.Sprintf("dlock %s; hand-written %s, redsync %s, bsm/redislock %s", s.format(f2),
			b.s3.get(keyHand, mCmds).format(f2), b.s3.get(keyRedsync, mCmds).format(f2), b.s3.get(keyBsm, mCmds).format(f2)))

	ts = append(ts, b.cpuTarget())

	s = b.s2.get(keyDlock, mRatio)
	add(fmt.Sprintf("%d goroutines on distinct names: ≥ 1.5× the hand-written lock (median), ≥ 1.3× (worst round)", b.cfg.goroutines), s,
		s.med >= target16Distinct && s.lo >= target16DistinctLo,
		fmt.Sprintf("median %s, worst round %s (%s vs %s ops/s)", fRatio(s.med), fRatio(s.lo),
			b.s2.get(keyDlock, mOps).format(fInt), b.s2.get(keyHand, mOps).format(fInt)))

	ts = append(ts, b.memoryTarget(target16Bytes))

	pg := spreadOf(int64s(b.longHold["Postgres"]))
	for _, c := range []struct {
		name, what string
		limit      float64
	}{
		{"SQLite", "SQLite: handoff p50 after a 300 ms hold, waiter in another process, ≤ 5 ms", target16SQLite},
		{"MariaDB", "MySQL/MariaDB: handoff p50 after a 300 ms hold (waiter in another process) ≤ 20 ms", target16MySQL},
	} {
		s := spreadOf(int64s(b.longHold[c.name]))
		add(c.what, s, s.med <= c.limit, fmt.Sprintf("%s %s over %d runs; PostgreSQL (LISTEN/NOTIFY) %s", c.name, s.format(fDur), s.n, pg.format(fDur)))
	}

	s = b.demo.get("demo", mJain)
	switch {
	case b.cfg.demoRuns == 0:
		add("`dlock demo` on the default store: Jain index over processes ≥ 0.9", spread{}, false, "not run (-demo 0)")
	case b.demoErr != nil:
		add("`dlock demo` on the default store: Jain index over processes ≥ 0.9", spread{}, false, "not measured: "+firstLine(b.demoErr.Error()))
	case s.n == 0: // every run printed no Jain index
		ts = append(ts, target{"MISS", "`dlock demo` on the default store: Jain index over processes ≥ 0.9", "not printed (its summary has no Jain index); per worker: " + demoPerWorker(b.demoOut)})
	default:
		add("`dlock demo` on the default store: Jain index over processes ≥ 0.9", s, s.med >= target16DemoJain,
			fmt.Sprintf("%s over %d run(s); last run's %s", s.format(f3), s.n, demoPerWorker(b.demoOut)))
	}

	for _, c := range []struct {
		name  string
		limit float64
	}{{"Etcd", target16Etcd}, {"ZooKeeper", target16ZooKeeper}} {
		v, ok := b.backendMetric(c.name, "Uncontended", "round-trips/op")
		s := spread{med: math.NaN()}
		if ok {
			s = spreadOf([]float64{v})
		}
		var peers []string
		for _, p := range []string{"Redis", "Postgres", "MariaDB", "SQLite"} {
			if pv, ok := b.backendMetric(p, "Uncontended", "round-trips/op"); ok {
				peers = append(peers, fmt.Sprintf("%s %.1f", p, pv))
			}
		}
		add(fmt.Sprintf("%s: uncontended acquire+release ≤ %.0f read-ping round trips", strings.Replace(c.name, "Etcd", "etcd", 1), c.limit), s, s.med <= c.limit,
			fmt.Sprintf("%.1f (section 5, one run); %s", s.med, strings.Join(peers, ", ")))
	}
	return ts
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// demoPerWorker is the "per worker" line of a demo's summary.
func demoPerWorker(out string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if _, after, ok := strings.Cut(line, "per worker"); ok {
			return "per worker `" + strings.TrimSpace(after) + "`"
		}
	}
	return "no per-worker line"
}

// writeIssue16 renders the long-hold handoff, the demo and the scaling
// charts.
func (b *bench) writeIssue16(p func(string, ...any)) error {
	p("## 7. Cross-process handoff after a long hold, and `dlock demo`\n\n")
	if b.cfg.longHoldRuns == 0 || !b.cfg.stores {
		p("Long-hold handoff not run (`-long-hold 0` or `-stores=false`).\n\n")
	} else {
		p("This process takes a name on the store, the worker process (the benchmark re-executed) opens its own Locker and calls Acquire on that name at an agreed instant, and this process releases %v later. The figure is the time from this process's Release returning to the worker's Acquire returning (one host: wall clocks agree), as sqllock's `BenchmarkLongHoldHandoff` measures within one process. %d runs per store, interleaved; p50 (min–max) over the runs.\n\n", longHold, b.cfg.longHoldRuns)
		p("| store | handoff p50 | runs |\n|---|---:|---:|\n")
		for _, name := range longHoldStores {
			s := spreadOf(int64s(b.longHold[name]))
			p("| %s | %s | %d |\n", name, s.format(fDur), s.n)
		}
		p("\n")
	}
	if b.cfg.demoRuns > 0 {
		p("`dlock demo` (built from the working tree, default options: 4 worker processes × 8 goroutines, 300 items) on its default store, a SQLite file under a temporary `$XDG_STATE_HOME`, %d run(s); the Jain index is read from a summary line containing `Jain`. Last run's output:\n\n```\n%s```\n\n", b.cfg.demoRuns, b.demoOut)
	}

	p("## 8. Scaling\n\n")
	if !b.cfg.scaling {
		p("Not run (`-scaling=false`).\n\n")
		return nil
	}
	stores := b.scalingStores()
	p("Stores: Redis (scenarios 1–4's server) and, with `-stores`, MariaDB, PostgreSQL, ZooKeeper and etcd started by dlock's test harness (`internal/testserver`, imported by this module) and a SQLite file in a temporary directory; dlock opens them by store URL (`dlock.Open`), default options.\n\n")
	p("### Handoff against the number of waiters\n\n")
	p("One name, n+1 contenders for n waiters, spread evenly over up to %d processes (this one and workers; each process shares one Locker), each holding the lock for a %v busy wait, for %v per point after 2 ms per waiter for the queue to form; %d round(s), stores interleaved. Handoff: from one owner's release call to the next acquisition by another owner. CPU and commands are measured over the steady window, after the queue's forming and the first fifth of the run (away from the queue filling up at the start and its waiters' cancellations at the stop), and divided by the acquisitions in it: all the processes' CPU (`getrusage`), redis-server's (`INFO cpu`) and Redis commands (`INFO commandstats` delta, inside scripts included). Median (min–max) over rounds.\n\n", scaleProcs, b.cfg.hold, b.cfg.scaleDur, b.cfg.scaleRounds)
	b.writeWaiters(p, stores)
	p("![handoff against waiters](%s)\n\n![CPU per acquisition against waiters](%s)\n\n", chartScaleHandoff, chartScaleCPU)
	b.writeConnections(p)

	b.writeHeld(p, stores)
	p("\n![uncontended cycle against locks held](%s)\n\n", chartScaleHeld)
	b.writeRenewal(p)

	return b.scalingCharts(stores)
}

// writeWaiters renders the waiters chart's table and the growth of its
// handoff p50.
func (b *bench) writeWaiters(p func(string, ...any), stores []store) {
	p("| store | waiters | acquisitions/s | handoff p50 | ÷ 1 waiter | handoff p99 | client CPU / acquisition | redis-server CPU / acquisition | Redis commands / acquisition |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, st := range stores {
		one := b.scaleW.get(scaleKey(st.name, scaleWaiters[0]), mHandP50)
		for _, n := range scaleWaiters {
			k := scaleKey(st.name, n)
			h := b.scaleW.get(k, mHandP50)
			ratio := noValue
			if h.n > 0 && one.n > 0 {
				ratio = fRatio(h.med / one.med)
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", st.name, n, b.scaleW.get(k, mOps).format(fInt), h.format(fDur), ratio,
				b.scaleW.get(k, mHandP99).format(fDur), b.scaleW.get(k, mCliCPU).format(fDur), b.scaleW.get(k, mSrvCPU).format(fDur), b.scaleW.get(k, mCmds).format(f2))
		}
	}
	p("\n")
	var growth []string
	for _, st := range stores {
		if r, ok := b.handoffRatio(st.name); ok {
			growth = append(growth, fmt.Sprintf("%s %s", st.name, fRatio(r)))
		}
	}
	if len(growth) > 0 {
		p("Handoff p50 at %d waiters ÷ at %d: %s.", scaleWaiters[len(scaleWaiters)-1], scaleWaiters[0], strings.Join(growth, ", "))
		a, z := b.scaleW.get(scaleKey("Redis", scaleWaiters[0]), mSrvCPU), b.scaleW.get(scaleKey("Redis", scaleWaiters[len(scaleWaiters)-1]), mSrvCPU)
		if a.n > 0 && z.n > 0 {
			p(" redis-server CPU per acquisition, the same ratio: %s.", fRatio(z.med/a.med))
		}
		p("\n\n")
	}
}

func (b *bench) scalingCharts(stores []store) error {
	xs := make([]float64, len(scaleWaiters))
	for i, n := range scaleWaiters {
		xs[i] = float64(n)
	}
	series := func(fg figures, metric string, keys []int, name, label string, dashed bool) lineSeries {
		sr := lineSeries{label: label, color: storePalette[name], dashed: dashed}
		for _, k := range keys {
			sr.ys = append(sr.ys, fg.get(scaleKey(name, k), metric))
		}
		return sr
	}
	var hand, cpu, held []lineSeries
	for _, st := range stores {
		hand = append(hand, series(b.scaleW, mHandP50, scaleWaiters, st.name, st.name, false))
		cpu = append(cpu, series(b.scaleW, mCliCPU, scaleWaiters, st.name, st.name+": client processes", false))
		if st.name == "Redis" {
			cpu = append(cpu, series(b.scaleW, mSrvCPU, scaleWaiters, st.name, "Redis: redis-server", true))
		}
		held = append(held, series(b.scaleH, mP50, scaleHeld, st.name, st.name, false))
	}
	if err := lineChart(filepath.Join(b.cfg.out, chartScaleHandoff), "Handoff p50 against waiters on one name", fmt.Sprintf("waiters (n+1 contenders over up to %d processes)", scaleProcs), "release call to next holder", xs, hand, fDur); err != nil {
		return err
	}
	if err := lineChart(filepath.Join(b.cfg.out, chartScaleCPU), "CPU per acquisition against waiters on one name", "waiters", "CPU time per acquisition", xs, cpu, fDur); err != nil {
		return err
	}
	hx := make([]float64, len(scaleHeld))
	for i, k := range scaleHeld {
		hx[i] = float64(k)
	}
	return lineChart(filepath.Join(b.cfg.out, chartScaleHeld), "Uncontended acquire+release p50 against locks held by the Locker", "locks already held by the Locker", "acquire+release p50", hx, held, fDur)
}

// writeHeld renders the held-locks chart's table.
func (b *bench) writeHeld(p func(string, ...any), stores []store) {
	p("### Uncontended cycle against locks already held\n\n")
	p("One Locker takes k distinct names (%d goroutines, 1 h lease, so no renewal falls in the run) and then times acquire+release of one more name for %v, for k = 1, 10, … up to %d (`-scale-held`)%s. One run; p50 (p99).\n\n", *fillWorkers, b.cfg.scaleHeldDur, b.cfg.scaleHeld, b.capsText())
	p("| store |")
	for _, k := range scaleHeld {
		p(" %d held |", k)
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(scaleHeld)))
	for _, st := range stores {
		p("| %s |", st.name)
		for _, k := range scaleHeld {
			key := scaleKey(st.name, k)
			if b.scaleH.get(key, mP50).n == 0 {
				p(" %s |", noValue)
				continue
			}
			p(" %s (%s) |", b.scaleH.get(key, mP50).format(fDur), b.scaleH.get(key, mP99).format(fDur))
		}
		p("\n")
	}
}
