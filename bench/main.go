// Command bench runs dlock's Redis backend side by side with redsync v4,
// bsm/redislock and a hand-written SET NX PX lock against a redis-server
// it starts itself, interleaving the libraries round by round, and writes
// REPORT.md with tables and SVG charts; its Redlock section runs dlock's
// redlock beside redsync over five more redis-servers. See README.md.
//
//	cd bench && go run . -out results          # about 15 minutes
//	cd bench && go run . -quick -out results   # a few minutes
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

type config struct {
	out           string
	redisServer   string
	rounds        int
	uncontended   time.Duration
	distinct      time.Duration
	goroutines    int
	hot           time.Duration
	hotGoroutines int
	hold          time.Duration
	ttl           time.Duration
	memLocks      int
	memRounds     int
	quick         bool
	// The Redlock section.
	redlock        bool
	redlockSigstop bool
	// Issue 16's sections.
	stores       bool // the other backends' servers (long-hold handoff, scaling on every backend)
	longHoldRuns int
	demoRuns     int
	scaling      bool
	scaleRounds  int
	scaleDur     time.Duration
	scaleHeld    int
	heldCaps     map[string]int // -scale-held-caps: lower caps by store
	scaleHeldDur time.Duration
	// Issue 30's Kubernetes section.
	kube       bool
	kubeRounds int
}

func main() {
	log.SetPrefix("redis: ")
	redis.SetLogger(quietDials{})
	if os.Getenv(kubeHolderEnv) != "" {
		if err := kubeHolderMain(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv(workerEnv) != "" {
		if err := workerMain(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.out, "out", "results", "directory for REPORT.md and the SVG charts")
	flag.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary")
	flag.IntVar(&c.rounds, "rounds", 6, "rounds; each runs every library once per scenario, interleaved")
	flag.DurationVar(&c.uncontended, "uncontended", time.Second, "scenario 1 duration per library per round")
	flag.DurationVar(&c.distinct, "distinct", time.Second, "scenario 2 duration per library per round")
	flag.IntVar(&c.goroutines, "goroutines", 64, "scenario 2 goroutines (distinct names)")
	flag.DurationVar(&c.hot, "hot", 2*time.Second, "scenario 3 duration per library per round")
	flag.IntVar(&c.hotGoroutines, "hot-goroutines", 16, "scenario 3 goroutines, split over 2 processes")
	flag.DurationVar(&c.hold, "hold", 100*time.Microsecond, "scenario 3 critical section (busy wait)")
	flag.DurationVar(&c.ttl, "ttl", defaultLibsTTL, "lease of every lock in scenarios 1-3")
	flag.IntVar(&c.memLocks, "mem-locks", 100_000, "scenario 4 held locks")
	flag.IntVar(&c.memRounds, "mem-rounds", 3, "scenario 4 rounds")
	flag.BoolVar(&c.redlock, "redlock", true, "run the Redlock section: dlock's redlock and redsync over 5 redis-servers, all up, 2 killed, 2 SIGSTOPped")
	flag.BoolVar(&c.redlockSigstop, "redlock-sigstop", true, "in the Redlock section, also run with 2 masters SIGSTOPped (each step then costs its timeout)")
	flag.BoolVar(&c.stores, "stores", true, "start MariaDB, PostgreSQL, ZooKeeper and etcd (and a SQLite file) for the long-hold handoff and the scaling charts on every backend; false: Redis only")
	flag.IntVar(&c.longHoldRuns, "long-hold", 8, "long-hold handoffs (300 ms hold, waiter in another process) per SQL store; 0 skips them")
	flag.IntVar(&c.demoRuns, "demo", 3, "runs of `dlock demo` on its default store (Jain index over processes); 0 skips it")
	flag.BoolVar(&c.scaling, "scaling", true, "run the scaling charts: handoff against waiters, cycle against held locks")
	flag.IntVar(&c.scaleRounds, "scale-rounds", 2, "rounds of the waiters chart")
	flag.DurationVar(&c.scaleDur, "scale-dur", time.Second, "waiters chart: duration of each run")
	flag.IntVar(&c.scaleHeld, "scale-held", 100_000, "held-locks chart and renewal runs: most locks one Locker holds, on every store but those -scale-held-caps lowers")
	heldCaps := flag.String("scale-held-caps", defaultHeldCaps, "held-locks chart and renewal runs: store=n,... lowers -scale-held on those stores; empty: -scale-held everywhere")
	flag.DurationVar(&c.scaleHeldDur, "scale-held-dur", 300*time.Millisecond, "held-locks chart: cycle loop per point")
	flag.BoolVar(&c.kube, "kube", true, "run the Kubernetes section: kubelock beside client-go's leader election on a kube-apiserver from dlock's test harness")
	flag.IntVar(&c.kubeRounds, "kube-rounds", 3, "rounds of the Kubernetes section (each about 45 s)")
	flag.BoolVar(&c.quick, "quick", false, "smoke run of a few minutes: 3 rounds, short durations, 20k held locks once, no SIGSTOPped Redlock masters (explicit flags win)")
	flag.Parse()
	if c.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]func(){
			"rounds":      func() { c.rounds = 3 },
			"uncontended": func() { c.uncontended = 250 * time.Millisecond },
			"distinct":    func() { c.distinct = 250 * time.Millisecond },
			"hot":         func() { c.hot = time.Second },
			"mem-locks":   func() { c.memLocks = 20_000 },
			"mem-rounds":  func() { c.memRounds = 1 },
			// The slowest condition of the Redlock section.
			"redlock-sigstop": func() { c.redlockSigstop = false },
			"long-hold":       func() { c.longHoldRuns = 3 },
			"demo":            func() { c.demoRuns = 1 },
			"scale-rounds":    func() { c.scaleRounds = 1 },
			"scale-dur":       func() { c.scaleDur = 500 * time.Millisecond },
			"scale-held":      func() { c.scaleHeld = 10_000 },
			"scale-held-dur":  func() { c.scaleHeldDur = 150 * time.Millisecond },
			"kube-rounds":     func() { c.kubeRounds = 2 },
		}
		for name, f := range quick {
			if !set[name] {
				f()
			}
		}
	}
	var err error
	if c.heldCaps, err = parseHeldCaps(*heldCaps); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -scale-held-caps:", err)
		os.Exit(2)
	}
	if *kubeOnly {
		b := &bench{cfg: c, start: time.Now(), kube: figures{}}
		b.runKube()
		var out strings.Builder
		b.writeKube(func(format string, a ...any) { fmt.Fprintf(&out, format, a...) })
		os.Stdout.WriteString(out.String())
		return
	}
	if c.rounds < 1 || c.hotGoroutines < 2 || c.goroutines < 1 || c.memLocks < 1 {
		fmt.Fprintln(os.Stderr, "bench: rounds, goroutines and mem-locks must be positive, hot-goroutines at least 2")
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is one run: the server, the worker process, and the figures.
type bench struct {
	backends    []backendBench // scenario 5
	backendsErr error
	cfg         config
	addr        string
	admin       *redis.Client // INFO, FLUSHALL; not counted by trips
	workers     []*worker     // the second process of scenario 3 first
	start       time.Time

	s1, s2, s3, s4 figures
	s1Samples      map[string][]int64 // latencies pooled over rounds (charts)
	s3Waits        map[string][]int64 // completed waits pooled over rounds
	s3Censored     map[string][]int64
	s3Cmds         map[string]cmdStats // last round's command breakdown
	s3LastN        map[string]int      // last round's acquisitions, all of them
	s3Trips        map[string]cmdStats // last round's client requests by command
	s3Overlaps     map[string]int

	rl     *redlockSet // the Redlock section's servers; nil without -redlock
	rlFigs redlockFigures

	// Issue 16.
	stores    *stores // nil without -stores
	storesErr error
	longHold  map[string][]int64 // store -> long-hold handoffs, ns
	demo      figures
	demoOut   string // the last demo's output
	demoErr   error
	scaleW    figures // scaleKey(store, waiters) -> metric
	scaleH    figures // scaleKey(store, held) -> metric
	i28       issue28 // connection counters, default-limit runs, renewal batches

	// Issue 30.
	kube    figures // by kubeLib key
	kubeErr error   // why the section did not run

	mu     sync.Mutex
	errors []string
}

func (b *bench) errorf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if len(b.errors) < 50 {
		b.errors = append(b.errors, msg)
	}
	fmt.Fprintln(os.Stderr, "bench:", msg)
}

// The libraries per scenario, in the order they run within a round.
var (
	s1Libs = []string{keyHand, keyDlock, keyDlockRueidis, keyRueidislock, keyRedsync, keyBsm}
	s2Libs = []string{keyHand, keyDlock, keyRedsync, keyBsm}
	s3Libs = []string{keyHand, keyDlock, keyDlockRueidis, keyRueidislock, keyRedsync, keyRedsync1ms, keyBsm, keyBsm1ms}
	s4Libs = []string{keyHand, keyDlock, keyRedsync, keyBsm}
)

func run(c config) error {
	srv, err := startRedis(c.redisServer)
	if err != nil {
		return err
	}
	defer srv.stop()
	var rl *redlockSet
	if c.redlock {
		if rl, err = startRedlockSet(c.redisServer); err != nil {
			return fmt.Errorf("redlock masters: %w", err)
		}
		defer rl.stop()
	}
	// Ctrl-C: kill the servers (the worker dies with its stdin).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	go func() { // exits with the process
		<-sig
		srv.stop()
		if rl != nil {
			rl.stop()
		}
		os.Exit(130)
	}()

	b := &bench{
		cfg: c, addr: srv.addr, start: time.Now(),
		admin: redis.NewClient(&redis.Options{Addr: srv.addr}),
		s1:    figures{}, s2: figures{}, s3: figures{}, s4: figures{},
		s1Samples: map[string][]int64{}, s3Waits: map[string][]int64{},
		s3Censored: map[string][]int64{}, s3Cmds: map[string]cmdStats{}, s3LastN: map[string]int{}, s3Trips: map[string]cmdStats{}, s3Overlaps: map[string]int{},
		longHold: map[string][]int64{}, demo: figures{}, scaleW: figures{}, scaleH: figures{}, kube: figures{},
		rl: rl, rlFigs: redlockFigures{s1: map[string]figures{}, s3: map[string]figures{}, overlaps: map[string]int{}},
	}
	for _, c := range []rlCondition{rlUp, rlKilled, rlKilled1, rlStopped} {
		b.rlFigs.s1[c.key], b.rlFigs.s3[c.key] = figures{}, figures{}
	}
	defer b.admin.Close()
	if *heldOnly {
		return b.runHeldOnly()
	}
	defer b.closeWorkers()
	if err := b.ensureWorkers(1); err != nil {
		return err
	}
	libs := allLibs()
	progress := b.progress
	progress("redis-server on %s; %d rounds", srv.addr, c.rounds)

	for round := range c.rounds {
		progress("round %d/%d: uncontended", round+1, c.rounds)
		b.roundUncontended(libs, round)
		progress("round %d/%d: 64 goroutines, distinct names", round+1, c.rounds)
		for _, k := range s2Libs {
			ops, tr, err := b.distinct(libs[k], round)
			if err != nil {
				b.errorf("distinct %s round %d: %v", k, round, err)
				continue
			}
			b.s2.add(k, mOps, ops)
			b.s2.addCost(k, tr)
		}
		for _, k := range s2Libs {
			if hand := b.s2[keyHand][mOps]; len(hand) == round+1 && len(b.s2[k][mOps]) == round+1 {
				b.s2.add(k, mRatio, b.s2[k][mOps][round]/hand[round])
			}
		}
		progress("round %d/%d: hot name, %d goroutines in 2 processes", round+1, c.rounds, c.hotGoroutines)
		for _, k := range s3Libs {
			b.roundHot(libs[k], round)
		}
		if b.rl != nil {
			b.roundRedlock(libs, round)
		}
	}
	for r := range c.memRounds {
		progress("memory %d/%d: %d held locks per library", r+1, c.memRounds, c.memLocks)
		for _, k := range s4Libs {
			net, used, err := b.memory(libs[k])
			if err != nil {
				b.errorf("memory %s: %v", k, err)
				continue
			}
			b.s4.add(k, mBytes, net)
			b.s4.add(k, mBytesUsed, used)
		}
	}
	if err := b.runIssue16(); err != nil {
		return err
	}
	if c.kube {
		b.runKube()
	}
	progress("other backends: go test -bench, %s", b.backendsBenchtime())
	b.backends, b.backendsErr = otherBackends(b.backendsBenchtime())
	if b.backendsErr != nil {
		b.errorf("other backends: %v", b.backendsErr)
	}
	progress("writing %s", filepath.Join(c.out, "REPORT.md"))
	return b.writeReport(srv, libs)
}

// progress reports on stderr how far the run is.
func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// roundUncontended runs scenario 1 once per library, each right after a
// PING loop of half its duration: the ratio uses that adjacent PING mean,
// so that load drifting during the round hits both alike.
func (b *bench) roundUncontended(libs map[string]lib, round int) {
	var pings []int64
	var pc []cost
	for _, k := range s1Libs {
		ping, c, err := b.pingLoop()
		if err != nil {
			b.errorf("ping round %d: %v", round, err)
			continue
		}
		pings = append(pings, ping...)
		pc = append(pc, c)
		lat, tr, err := b.uncontended(libs[k], round)
		if err != nil {
			b.errorf("uncontended %s round %d: %v", k, round, err)
			continue
		}
		m := mean(lat)
		b.s1.add(k, mP50, float64(percentile(lat, 50)))
		b.s1.add(k, mP99, float64(percentile(lat, 99)))
		b.s1.add(k, mMean, m)
		b.s1.add(k, mRatio, m/(2*mean(ping)))
		b.s1.addCost(k, tr)
		b.s1Samples[k] = append(b.s1Samples[k], lat...)
	}
	if len(pings) == 0 {
		return
	}
	slices.Sort(pings)
	b.s1.add("ping", mP50, float64(percentile(pings, 50)))
	b.s1.add("ping", mP99, float64(percentile(pings, 99)))
	b.s1.add("ping", mMean, mean(pings))
	var sum cost
	for _, c := range pc {
		sum.trips += c.trips / float64(len(pc))
		sum.clientCPU += c.clientCPU / float64(len(pc))
		sum.serverCPU += c.serverCPU / float64(len(pc))
	}
	b.s1.addCost("ping", sum)
}

func (b *bench) roundHot(l lib, round int) {
	f, cmds, by, err := b.hot(l, round)
	if err != nil {
		b.errorf("hot %s round %d: %v", l.key, round, err)
		return
	}
	k := l.key
	b.s3.addHot(k, f)
	b.s3Waits[k] = append(b.s3Waits[k], f.waits...)
	b.s3Censored[k] = append(b.s3Censored[k], f.censored...)
	b.s3Cmds[k] = cmds
	b.s3Trips[k] = by
	b.s3LastN[k] = f.total
	b.s3Overlaps[k] += f.overlaps
	if f.overlaps > 0 {
		b.errorf("hot %s round %d: %d acquisitions began before the previous holder called release (mutual exclusion broken?)", k, round, f.overlaps)
	}
}

// addHot adds one hot-name run's figures for library k.
func (fg figures) addHot(k string, f hotFigures) {
	nan := math.NaN() // no acquisition: no wait percentiles, no fairness
	fg.add(k, mOps, f.rate)
	if len(f.waits) > 0 {
		fg.add(k, mWaitP50, float64(percentile(f.waits, 50)))
		fg.add(k, mWaitP99, float64(percentile(f.waits, 99)))
	} else {
		fg.add(k, mWaitP50, nan)
		fg.add(k, mWaitP99, nan)
	}
	fg.add(k, mWaitMax, float64(f.waitMax))
	if len(f.handoffs) > 0 {
		fg.add(k, mHandP50, float64(percentile(f.handoffs, 50)))
		fg.add(k, mHandP99, float64(percentile(f.handoffs, 99)))
	}
	fg.add(k, mSelf, f.selfReacquire)
	if f.n > 0 {
		fg.add(k, mJain, f.jain)
	} else {
		fg.add(k, mJain, nan)
	}
	fg.add(k, mCmds, f.cmdsPerAcq)
	fg.add(k, mTrips, f.rtPerAcq)
	fg.add(k, mCliCPU, f.clientCPU)
	fg.add(k, mSrvCPU, f.serverCPU)
	fg.add(k, mGiveUps, float64(f.giveUps))
	fg.add(k, mCensor, float64(len(f.censored)))
}

// backendsBenchtime is scenario 5's -benchtime.
func (b *bench) backendsBenchtime() string {
	if b.cfg.quick {
		return "50x"
	}
	return "300x"
}
