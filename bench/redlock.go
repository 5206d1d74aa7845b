package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redlock"
)

// The Redlock section (issue 14): dlock's redlock and redsync over five
// independent redis-servers, with all of them up, with two killed and
// with two SIGSTOPped.

const (
	redlockMasters = 5
	redlockDown    = 2
	keyRLRedsync   = "redsync-5"
	keyRLRedsync1  = "redsync-5-1ms"
	rlWarmOps      = 5 // warm-up of the uncontended loop, all masters up
)

var (
	keyRLDlock = dlockLib(redlockBackend{}).key
	// rlLibs are the contenders, in the order they run within a round;
	// the uncontended scenario leaves out the tuned redsync (no retries
	// happen without contention).
	rlLibs   = []string{keyRLDlock, keyRLRedsync, keyRLRedsync1}
	rlS1Libs = []string{keyRLDlock, keyRLRedsync}

	rlRedsyncLib = lib{key: keyRLRedsync, label: "redsync, 5 pools (defaults: 32 tries, 50–250 ms delay)", short: "redsync (defaults)", open: func(addrs string, ttl time.Duration) (locker, error) {
		return newRedsync(addrs, redsync.WithExpiry(ttl)), nil
	}}
	rlRedsync1msLib = lib{key: keyRLRedsync1, label: "redsync, 5 pools (tuned: 1 ms delay)", short: "redsync (1 ms)", open: func(addrs string, ttl time.Duration) (locker, error) {
		return newRedsync(addrs, redsync.WithExpiry(ttl), redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(math.MaxInt32)), nil
	}}
)

// redlockBackend is dlock's redlock with default options over one go-redis
// client per master (default options, counted by trips); Open takes the
// masters' addresses separated by commas.
type redlockBackend struct{}

func (redlockBackend) Name() string { return "redlock" }

func (redlockBackend) Open(addrs string) (*dlock.Locker, func() error, error) {
	var cs []redis.UniversalClient
	closeAll := func() error {
		var errs []error
		for _, c := range cs {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	for a := range strings.SplitSeq(addrs, ",") {
		cs = append(cs, newClient(a))
	}
	l, err := redlock.New(cs, nil)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return l, func() error { return errors.Join(l.Close(), closeAll()) }, nil
}

// rlCondition is a state of the five masters during a run.
type rlCondition struct {
	key, label string
}

var (
	rlUp      = rlCondition{"up", "5 of 5 up"}
	rlKilled  = rlCondition{"killed", "2 of 5 killed"}
	rlKilled1 = rlCondition{"killed-no-retries", "2 of 5 killed, go-redis retries off"}
	rlStopped = rlCondition{"stopped", "2 of 5 SIGSTOPped"}
)

// redlockSet is the section's servers: five masters, and the addresses
// of two more that were started and killed (connections refused).
type redlockSet struct {
	masters []*redisServer
	dead    []string
	ping    []*redis.Client // one per master, for the parallel PING
}

func startRedlockSet(bin string) (*redlockSet, error) {
	s := &redlockSet{}
	for range redlockMasters + redlockDown {
		srv, err := startRedis(bin)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.masters = append(s.masters, srv)
	}
	for _, srv := range s.masters[redlockMasters:] {
		s.dead = append(s.dead, srv.addr)
		if err := srv.stop(); err != nil {
			s.stop()
			return nil, err
		}
	}
	s.masters = s.masters[:redlockMasters]
	for _, m := range s.masters {
		s.ping = append(s.ping, redis.NewClient(&redis.Options{Addr: m.addr}))
	}
	return s, nil
}

// stop kills the masters (also stopped ones) and removes their
// directories.
func (s *redlockSet) stop() error {
	var errs []error
	for _, c := range s.ping {
		c.Close()
	}
	for _, m := range s.masters {
		errs = append(errs, m.stop())
	}
	return errors.Join(errs...)
}

// addrs returns the comma-separated addresses the clients get under c.
func (s *redlockSet) addrs(c rlCondition) string {
	var a []string
	for _, m := range s.masters {
		a = append(a, m.addr)
	}
	if c == rlKilled || c == rlKilled1 {
		a = append(a[:redlockMasters-redlockDown], s.dead...)
	}
	if c == rlKilled1 {
		for i := range a {
			a[i] += noRetries
		}
	}
	return strings.Join(a, ",")
}

// checkDead confirms that the killed masters' ports refuse connections
// (another process may have taken one meanwhile).
func (s *redlockSet) checkDead() error {
	for _, a := range s.dead {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("killed master's port %s accepts connections again (taken by another process)", a)
		}
	}
	return nil
}

// signalDown sends sig (SIGSTOP or SIGCONT) to the last two masters.
func (s *redlockSet) signalDown(sig syscall.Signal) error {
	var errs []error
	for _, m := range s.masters[redlockMasters-redlockDown:] {
		errs = append(errs, syscall.Kill(m.cmd.Process.Pid, sig))
	}
	return errors.Join(errs...)
}

// resume continues the stopped masters and waits until they answer.
func (s *redlockSet) resume() error {
	if err := s.signalDown(syscall.SIGCONT); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range s.ping[redlockMasters-redlockDown:] {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s after SIGCONT: %w", c.Options().Addr, err)
		}
	}
	return nil
}

// pingAll sends one PING to every master in parallel and returns when the
// slowest has answered: Redlock's round trip.
func (s *redlockSet) pingAll(ctx context.Context) error {
	errs := make([]error, len(s.ping))
	var wg sync.WaitGroup
	for i, c := range s.ping {
		wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Metrics of the Redlock section besides the shared ones: figures in
// round trips of the slowest master (the parallel PING's mean in the same
// round).
const (
	mP50RT     = "p50_rt"
	mP99RT     = "p99_rt"
	mMeanRT    = "mean_rt"
	mPerAcqRT  = "per_acq_rt"
	mWaitP50RT = "wait_p50_rt"
	mWaitP99RT = "wait_p99_rt"
	mWaitMaxRT = "wait_max_rt"
)

// redlockFigures are the section's figures by condition key.
type redlockFigures struct {
	s1, s3   map[string]figures
	overlaps map[string]int // by condition + "/" + library
}

// rlConditions returns the conditions the section runs, in order.
func (b *bench) rlConditions() []rlCondition {
	conds := []rlCondition{rlUp, rlKilled, rlKilled1}
	if b.cfg.redlockSigstop {
		conds = append(conds, rlStopped)
	}
	return conds
}

// roundRedlock runs one round of the section: under each condition, the
// uncontended scenario and the hot name for every contender.
func (b *bench) roundRedlock(libs map[string]lib, round int) {
	for _, c := range b.rlConditions() {
		if c == rlKilled || c == rlKilled1 {
			if err := b.rl.checkDead(); err != nil {
				b.errorf("redlock round %d: %v", round, err)
				continue
			}
		}
		b.progress("round %d/%d: redlock, %s: uncontended", round+1, b.cfg.rounds, c.label)
		var pings []float64
		for _, k := range rlS1Libs {
			if p, ok := b.redlockUncontended(libs[k], c, round); ok {
				pings = append(pings, p)
			}
		}
		if len(pings) == 0 {
			continue
		}
		unit := 0.0
		for _, p := range pings {
			unit += p / float64(len(pings))
		}
		b.progress("round %d/%d: redlock, %s: hot name", round+1, b.cfg.rounds, c.label)
		for _, k := range rlLibs {
			b.redlockHot(libs[k], c, round, unit)
		}
	}
}

// redlockUncontended runs the uncontended scenario for l under c, right
// after a parallel-PING loop of half its duration (all masters up), and
// returns that loop's mean.
func (b *bench) redlockUncontended(l lib, c rlCondition, round int) (float64, bool) {
	ctx := context.Background()
	ping, err := timeLoop(b.cfg.uncontended/2, func() error { return b.rl.pingAll(ctx) }, func() {})
	if err != nil {
		b.errorf("redlock ping round %d: %v", round, err)
		return 0, false
	}
	unit := mean(ping)
	fig := b.rlFigs.s1[c.key]
	fig.add("ping", mP50, float64(percentile(ping, 50)))
	fig.add("ping", mP99, float64(percentile(ping, 99)))
	fig.add("ping", mMean, unit)
	var trips0 int64
	measure := func() {
		if c == rlStopped { // after the warm-up, with every connection open
			if err := b.rl.signalDown(syscall.SIGSTOP); err != nil {
				b.errorf("redlock SIGSTOP: %v", err)
			}
		}
		trips0 = trips.n.Load()
	}
	var reqs float64
	done := func(n int) { reqs = float64(trips.n.Load()-trips0) / float64(n) }
	name := fmt.Sprintf("rl1:%s:%s:%d", c.key, l.key, round)
	lat, err := lockLoop(l, b.rl.addrs(c), b.cfg.ttl, name, b.cfg.uncontended, rlWarmOps, measure, done)
	if c == rlStopped {
		if err := b.rl.resume(); err != nil {
			b.errorf("redlock resume: %v", err)
		}
	}
	if err != nil {
		b.errorf("redlock uncontended %s %s round %d: %v", c.key, l.key, round, err)
		return unit, true
	}
	k := l.key
	m := mean(lat)
	fig.add(k, mP50, float64(percentile(lat, 50)))
	fig.add(k, mP99, float64(percentile(lat, 99)))
	fig.add(k, mMean, m)
	fig.add(k, mP50RT, float64(percentile(lat, 50))/unit)
	fig.add(k, mP99RT, float64(percentile(lat, 99))/unit)
	fig.add(k, mMeanRT, m/unit)
	fig.add(k, mOpTrips, reqs)
	fig.add(k, mOps, float64(len(lat)))
	return unit, true
}

// redlockHot runs the hot name for l under c; unit is the round's
// parallel PING mean.
func (b *bench) redlockHot(l lib, c rlCondition, round int, unit float64) {
	if c == rlStopped {
		if err := b.rl.signalDown(syscall.SIGSTOP); err != nil {
			b.errorf("redlock SIGSTOP: %v", err)
		}
	}
	halves, job, err := b.runSpread(l, b.rl.addrs(c), fmt.Sprintf("rl3:%s:%s:%d", c.key, l.key, round), spreadSpec{contenders: b.cfg.hotGoroutines, procs: 2, d: b.cfg.hot})
	if c == rlStopped {
		if err := b.rl.resume(); err != nil {
			b.errorf("redlock resume: %v", err)
		}
	}
	if err != nil {
		b.errorf("redlock hot %s %s round %d: %v", c.key, l.key, round, err)
		return
	}
	for _, h := range halves {
		for _, e := range h.Errors {
			b.errorf("redlock hot %s %s round %d: %s", c.key, l.key, round, e)
		}
	}
	f := computeHot(halves, b.cfg.hotGoroutines, job.StartNs, job.StopNs, nil)
	k := l.key
	fig := b.rlFigs.s3[c.key]
	fig.addHot(k, f)
	if f.n > 0 {
		fig.add(k, mPerAcqRT, 1e9/f.rate/unit)
	}
	if len(f.waits) > 0 {
		fig.add(k, mWaitP50RT, float64(percentile(f.waits, 50))/unit)
		fig.add(k, mWaitP99RT, float64(percentile(f.waits, 99))/unit)
	}
	fig.add(k, mWaitMaxRT, float64(f.waitMax)/unit)
	b.rlFigs.overlaps[c.key+"/"+k] += f.overlaps
	if f.overlaps > 0 {
		b.errorf("redlock hot %s %s round %d: %d acquisitions began before the previous holder called release (mutual exclusion broken?)", c.key, k, round, f.overlaps)
	}
}

// writeRedlock renders the Redlock section.
func (b *bench) writeRedlock(p func(string, ...any), libs map[string]lib) {
	if b.rl == nil {
		return
	}
	conds := b.rlConditions()
	p("## 6. Redlock: 5 independent masters, dlock's redlock beside redsync\n\n")
	p("Five more redis-servers started by the benchmark like the first (loopback, no persistence, temporary directories). ")
	p("dlock's `redlock.New` (default options: per-master timeout TTL/10 = %v, drift 1%% + 2 ms) and redsync v4 with one goredis v9 pool per master, each over go-redis clients with default options. ", min(b.cfg.ttl/10, redlock.DefaultMaxNodeTimeout))
	p("Runs under each condition are interleaved with everything else, round by round (%d rounds; median (min–max) across rounds). Conditions:\n\n", b.cfg.rounds)
	p("- *%s*;\n", rlUp.label)
	p("- *%s*: the clients are given 3 of the masters and the addresses of 2 more redis-servers that the benchmark started and killed at the start, so every connection to those is refused (checked before each round); with go-redis's defaults, a request to them dials 5 times 100 ms apart, and the command is retried 3 times with a backoff of 8 to 512 ms. The masters are never restarted, since a restarted master is young and dlock's restart defence would discount it;\n", rlKilled.label)
	p("- *%s*: the same, with every client's `MaxRetries` set to -1 and `DialerRetries` to 1, so a request to a killed master fails at the first refused connection;\n", rlKilled1.label)
	if b.cfg.redlockSigstop {
		p("- *%s*: 2 of the 5 masters get SIGSTOP (after the uncontended loop's warm-up, with its connections open; before the hot-name run starts its clients) and SIGCONT after the run: the kernel still accepts their connections, but nothing answers, so every step on them costs its timeout. The uncontended loop runs at least one measured operation even when one takes longer than the scenario's %v.\n", rlStopped.label, b.cfg.uncontended)
	}
	p("\nEvery figure is also given in **round trips of the slowest master (RT)**: divided by the mean of a loop of parallel PINGs to all 5 masters (one PING to each, timed until the slowest answers), all up, run for %v right before each library's uncontended run in the same round; the hot name uses the mean of that round's and condition's PING loops.\n\n", b.cfg.uncontended/2)

	p("### Uncontended acquire + release\n\n")
	p("| masters | library | p50 | p99 | mean | p50 (RT) | p99 (RT) | mean (RT) | requests / op (all masters) | operations per round |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range conds {
		fig := b.rlFigs.s1[c.key]
		p("| %s | parallel PING to 5 masters (the unit, all up) | %s | %s | %s | – | – | 1 RT | – | – |\n", c.label, fig.get("ping", mP50).format(fDur), fig.get("ping", mP99).format(fDur), fig.get("ping", mMean).format(fDur))
		for _, k := range rlS1Libs {
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.label, libs[k].label,
				fig.get(k, mP50).format(fDur), fig.get(k, mP99).format(fDur), fig.get(k, mMean).format(fDur),
				fig.get(k, mP50RT).format(fRT), fig.get(k, mP99RT).format(fRT), fig.get(k, mMeanRT).format(fRT),
				fig.get(k, mOpTrips).format(f2), fig.get(k, mOps).format(fInt))
		}
	}
	p("\n### One hot name, %d goroutines in 2 processes\n\n", b.cfg.hotGoroutines)
	p("As scenario 3 (%v per library per round, a %v busy-wait critical section, both processes from agreed instants), over the 5 masters. *time per acquisition* is the window divided by the acquisitions in it.\n\n", b.cfg.hot, b.cfg.hold)
	p("| masters | library | acquisitions/s | time per acquisition (RT) | wait p50 | wait p99 | wait max | wait p50 (RT) | wait p99 (RT) | wait max (RT) | Jain's index | requests / acquisition | give-ups per round | still waiting at stop |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range conds {
		fig := b.rlFigs.s3[c.key]
		for _, k := range rlLibs {
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.label, libs[k].label,
				fig.get(k, mOps).format(f1), fig.get(k, mPerAcqRT).format(fRT),
				fig.get(k, mWaitP50).format(fDur), fig.get(k, mWaitP99).format(fDur), fig.get(k, mWaitMax).format(fDur),
				fig.get(k, mWaitP50RT).format(fRT), fig.get(k, mWaitP99RT).format(fRT), fig.get(k, mWaitMaxRT).format(fRT),
				fig.get(k, mJain).format(f3), fig.get(k, mTrips).format(f2), fig.get(k, mGiveUps).format(fInt), fig.get(k, mCensor).format(fInt))
		}
	}
	p("\n*requests*: go-redis requests over all masters, both processes (a pipeline is one); a request to a killed master is counted although it fails. *wait max* counts callers still waiting at the stop.\n\n")
	b.writeRedlockReading(p)
}

// writeRedlockReading writes the section's paragraph of reading.
func (b *bench) writeRedlockReading(p func(string, ...any)) {
	s1 := func(c rlCondition, k, m string) spread { return b.rlFigs.s1[c.key].get(k, m) }
	s3 := func(c rlCondition, k, m string) spread { return b.rlFigs.s3[c.key].get(k, m) }
	p("**Reading.** All up, an uncontended acquire+release costs dlock %s (%s requests over the masters: the acquisition, the fencing token's write-back to a majority, the release) against redsync's %s (%s requests: acquisition and release, no token). ",
		s1(rlUp, keyRLDlock, mMeanRT).format(fRT), s1(rlUp, keyRLDlock, mOpTrips).format(f2), s1(rlUp, keyRLRedsync, mMeanRT).format(fRT), s1(rlUp, keyRLRedsync, mOpTrips).format(f2))
	p("On the hot name, dlock makes %s acquisitions/s (Jain %s, %s requests each), redsync %s with its defaults (Jain %s) and %s tuned to 1 ms (Jain %s). ",
		s3(rlUp, keyRLDlock, mOps).format(f1), s3(rlUp, keyRLDlock, mJain).format(f3), s3(rlUp, keyRLDlock, mTrips).format(f2),
		s3(rlUp, keyRLRedsync, mOps).format(f1), s3(rlUp, keyRLRedsync, mJain).format(f3), s3(rlUp, keyRLRedsync1, mOps).format(f1), s3(rlUp, keyRLRedsync1, mJain).format(f3))
	p("With 2 masters killed, go-redis's default retries dominate both libraries (uncontended: dlock %s, redsync %s per operation); with its retries off, dlock %s and redsync %s. ",
		s1(rlKilled, keyRLDlock, mMean).format(fDur), s1(rlKilled, keyRLRedsync, mMean).format(fDur), s1(rlKilled1, keyRLDlock, mMean).format(fDur), s1(rlKilled1, keyRLRedsync, mMean).format(fDur))
	if b.cfg.redlockSigstop {
		p("With 2 masters SIGSTOPped, dlock completed %s uncontended operations per round (mean %s; a failed acquisition would be listed under Errors) and redsync %s (mean %s). ",
			s1(rlStopped, keyRLDlock, mOps).format(fInt), s1(rlStopped, keyRLDlock, mMean).format(fDur), s1(rlStopped, keyRLRedsync, mOps).format(fInt), s1(rlStopped, keyRLRedsync, mMean).format(fDur))
		p("Each of dlock's steps (the votes, then the token's write-back) waits for the stopped masters until the per-master timeout (TTL/10, 1 s here) and goes on with the others, even while go-redis is stuck in a stopped master's handshake; redsync waits for its own 10 s. ")
	}
	p("A dash means no round produced the figure.\n\n")
}

func fRT(x float64) string { // a multiple of the parallel PING
	if x < 10 {
		return fmt.Sprintf("%.1f RT", x)
	}
	return fmt.Sprintf("%.0f RT", x)
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
