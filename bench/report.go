package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Targets for dlock from issue 6.
const (
	targetUncontended = 1.2   // mean / (2×PING mean), at most
	targetDistinct    = 1.5   // ops/s / hand-written ops/s, at least
	targetTrips       = 2.5   // round trips per acquisition on the hot name, at most
	targetMaxWait     = 100e6 // ns: longest wait on the hot name, at most
	targetJain        = 0.95  // at least
	targetHotRatio    = 1.0   // hot acquisitions/s / the hand-written 1 ms poller's, at least
	targetBytes       = 200.0 // per held lock, at most
)

// Files written to the -out directory.
const (
	reportName       = "REPORT.md"
	chartUncontended = "uncontended.svg"
	chartWaits       = "hot-waits.svg"
	chartHot         = "hot-throughput.svg"
)

const (
	noValue          = "–"
	timeLayout       = "2006-01-02 15:04 MST"
	dlockTreeVersion = "working tree (replace ../)"
)

func (b *bench) writeReport(srv *redisServer, libs map[string]lib) error {
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	label := func(k string) string {
		if k == "ping" {
			return "go-redis PING (floor)"
		}
		return libs[k].label
	}
	var r strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&r, format, args...) }

	p("# dlock benchmark report\n\n")
	p("dlock (Redis backend) side by side with redsync v4, bsm/redislock and a hand-written `SET NX PX` lock, on one loopback `redis-server` started by the benchmark. ")
	p("The libraries run interleaved (A B C … A B C …) for %d rounds; every cell is **median (min–max) across rounds**. ", b.cfg.rounds)
	p("Generated %s by `%s` in %s (`make bench` runs `cd bench && go run . -out results`).\n\n", time.Now().UTC().Format(timeLayout), strings.Join(append([]string{"go run ."}, os.Args[1:]...), " "), time.Since(b.start).Round(time.Second))

	// Targets first: the reader's question.
	p("## Targets for dlock (issue 6)\n\n")
	for _, t := range b.targets() {
		p("- **%s** %s: %s\n", t.verdict, t.what, t.measured)
	}
	p("\n")
	p("## Targets for dlock (issue 16)\n\n")
	for _, t := range b.targets16() {
		p("- **%s** %s: %s\n", t.verdict, t.what, t.measured)
	}
	p("\n")
	p("## Targets for dlock (issue 28)\n\n")
	for _, t := range b.targets28() {
		p("- **%s** %s: %s\n", t.verdict, t.what, t.measured)
	}
	p("\n")

	p("## Settings\n\n")
	p("| setting | value |\n|---|---|\n")
	for _, kv := range b.settings(srv) {
		p("| %s | %s |\n", kv[0], kv[1])
	}
	p("\n")

	// Scenario 1.
	p("## 1. Uncontended acquire + release, one goroutine\n\n")
	p("One goroutine takes and releases one name in a loop for %v per library per round. Right before each library, a go-redis PING loop runs for half as long; the ratio is the library's mean over two of those PINGs (a lock costs at least a round trip to take and one to release). CPU per operation: this process (`getrusage`) and redis-server (`INFO cpu`).\n\n", b.cfg.uncontended)
	p("| library | p50 | p99 | mean | mean / 2×PING | round trips / op | client CPU / op | redis-server CPU / op |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range append([]string{"ping"}, s1Libs...) {
		ratio := b.s1.get(k, mRatio).format(fRatio)
		if k == "ping" { // the floor
			ratio = "0.50× (by definition)"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", label(k), b.s1.get(k, mP50).format(fDur), b.s1.get(k, mP99).format(fDur), b.s1.get(k, mMean).format(fDur), ratio,
			b.s1.get(k, mOpTrips).format(f2), b.s1.get(k, mCliCPU).format(fDur), b.s1.get(k, mSrvCPU).format(fDur))
	}
	p("\n![uncontended mean as a multiple of two PINGs](%s)\n\n", chartUncontended)
	var rows []barRow
	for _, k := range s1Libs {
		rows = append(rows, barRow{label: libs[k].short, color: palette[k], s: b.s1.get(k, mRatio)})
	}
	if err := ratioChart(filepath.Join(b.cfg.out, chartUncontended), "Uncontended acquire+release: mean / (2 × PING mean)", "multiple of two PING round trips (bar: median; whisker: min–max across rounds)", rows, map[float64]string{1: "2×PING", targetUncontended: "target ≤ 1.2"}, f2); err != nil {
		return err
	}

	// Scenario 2.
	p("## 2. %d goroutines on distinct names\n\n", b.cfg.goroutines)
	p("%d goroutines share one client (one dlock Locker, one redsync, one bsm client; go-redis default pool), each acquiring and releasing its own name, for %v per library per round after a warm-up. The ratio is to the hand-written lock in the same round.\n\n", b.cfg.goroutines, b.cfg.distinct)
	p("| library | acquire+release per second | ratio to hand-written | round trips / op | client CPU / op | redis-server CPU / op |\n|---|---:|---:|---:|---:|---:|\n")
	for _, k := range s2Libs {
		p("| %s | %s | %s | %s | %s | %s |\n", label(k), b.s2.get(k, mOps).format(fInt), b.s2.get(k, mRatio).format(fRatio),
			b.s2.get(k, mOpTrips).format(f2), b.s2.get(k, mCliCPU).format(fDur), b.s2.get(k, mSrvCPU).format(fDur))
	}
	p("\n")

	// Scenario 3.
	p("## 3. One hot name, %d goroutines in 2 processes\n\n", b.cfg.hotGoroutines)
	p("%d goroutines in this process and %d in a second process (the benchmark re-executed) contend for one name for %v per library per round, each holding it for a %v busy-wait critical section; each process shares one client. ", b.cfg.hotGoroutines/2, b.cfg.hotGoroutines-b.cfg.hotGoroutines/2, b.cfg.hot, b.cfg.hold)
	p("Peers run with their documented defaults (redsync: 32 tries with 50–250 ms delays; bsm: the README's 100 ms linear backoff with 3 retries, since its default is no retry) and tuned to 1 ms retries. When a library call gives up while the caller still wants the lock, the caller calls again and the wait goes on (counted as give-ups).\n\n")
	p("| library | acquisitions/s | wait p50 | wait p99 | wait max | handoff p50 | handoff p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range s3Libs {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", label(k), b.s3.get(k, mOps).format(fInt),
			b.s3.get(k, mWaitP50).format(fDur), b.s3.get(k, mWaitP99).format(fDur), b.s3.get(k, mWaitMax).format(fDur),
			b.s3.get(k, mHandP50).format(fDur), b.s3.get(k, mHandP99).format(fDur))
	}
	p("\n| library | same owner again | Jain's index | round trips / acquisition | Redis commands / acquisition | client CPU / acquisition | redis-server CPU / acquisition | give-ups per round | still waiting at stop |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range s3Libs {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(k), b.s3.get(k, mSelf).format(fPct), b.s3.get(k, mJain).format(f3),
			b.s3.get(k, mTrips).format(f2), b.s3.get(k, mCmds).format(f2), b.s3.get(k, mCliCPU).format(fDur), b.s3.get(k, mSrvCPU).format(fDur),
			b.s3.get(k, mGiveUps).format(fInt), b.s3.get(k, mCensor).format(fInt))
	}
	p("\n![wait-time distribution on the hot name](%s)\n\n", chartWaits)
	p("![hot-name throughput](%s)\n\n", chartHot)
	p("- *wait*: from the lock call to its return with the lock; *wait max* also counts callers still waiting when the run stopped (their wait so far).\n")
	p("- *handoff*: from one owner calling release to the next acquisition by a **different** owner (possibly in the other process; one host, so wall clocks agree). *same owner again*: share of successive acquisitions taken by the goroutine that just released.\n")
	p("- *Jain's index* over the %d goroutines' acquisition counts: 1 is perfectly even, 1/%d is one goroutine taking everything.\n", b.cfg.hotGoroutines, b.cfg.hotGoroutines)
	p("- *round trips*: requests the clients sent (go-redis hook: one per command, one per pipeline, both processes) plus SUBSCRIBE/UNSUBSCRIBE calls (which bypass hooks; from the server). *Redis commands*: the sum of `INFO commandstats` calls deltas, which also counts the commands each Lua script runs inside Redis (`EVALSHA` + its `GET`, `SET`, …), minus the benchmark's own `INFO`.\n\n")
	p("What each library sent and what Redis ran in the last round, over all its acquisitions (including those completing after the stop):\n\n")
	p("| library | acquisitions | client requests (go-redis hook, both processes; `evalsha:` + script SHA1 prefix) | server commands (`INFO commandstats` delta) |\n|---|---:|---|---|\n")
	for _, k := range s3Libs {
		if d, ok := b.s3Cmds[k]; ok {
			p("| %s | %d | `%s` | `%s` |\n", label(k), b.s3LastN[k], b.s3Trips[k].top(0), d.top(0))
		}
	}
	p("\n")
	var series []cdfSeries
	var hotRows []barRow
	for _, k := range s3Libs {
		w := slices.Clone(b.s3Waits[k])
		slices.Sort(w)
		series = append(series, cdfSeries{label: libs[k].short, color: palette[k], waits: w, censored: len(b.s3Censored[k])})
		hotRows = append(hotRows, barRow{label: libs[k].short, color: palette[k], s: b.s3.get(k, mOps)})
	}
	if err := cdfChart(filepath.Join(b.cfg.out, chartWaits), fmt.Sprintf("Hot name, %d goroutines in 2 processes: wait until acquired (all rounds)", b.cfg.hotGoroutines), series, targetMaxWait, "target max 100 ms"); err != nil {
		return err
	}
	if err := ratioChart(filepath.Join(b.cfg.out, chartHot), "Hot name: acquisitions per second", "acquisitions/s (bar: median; whisker: min–max across rounds)", hotRows, nil, fInt); err != nil {
		return err
	}

	// Scenario 4.
	p("## 4. Memory per held lock\n\n")
	p("`INFO memory` `used_memory` growth while %d distinct names are held (taken by 16 goroutines, never released, 1 h lease), divided by %d; after a FLUSHALL, with the clients' connections already open. %d round(s). *Bytes per held lock* subtracts the change of the clients' connection memory over the same span (the sum of `CLIENT LIST` `tot-mem`: query and output buffers, which redis-server grows and trims with traffic, not with locks held); the last column is `used_memory` growth alone.\n\n", b.cfg.memLocks, b.cfg.memLocks, b.cfg.memRounds)
	p("| library | bytes per held lock | used_memory growth per lock |\n|---|---:|---:|\n")
	for _, k := range s4Libs {
		p("| %s | %s | %s |\n", label(k), b.s4.get(k, mBytes).format(f1), b.s4.get(k, mBytesUsed).format(f1))
	}
	p("\n")

	writeBackends(p, b.backends, b.backendsBenchtime(), b.backendsErr)
	b.writeRedlock(p, libs)
	if err := b.writeIssue16(p); err != nil {
		return err
	}
	if b.cfg.kube {
		b.writeKube(p)
	}

	if len(b.errors) > 0 {
		p("## Errors during the run\n\n")
		for _, e := range b.errors {
			p("- %s\n", e)
		}
		p("\n")
	}
	return os.WriteFile(filepath.Join(b.cfg.out, reportName), []byte(r.String()), 0o644)
}

type target struct{ verdict, what, measured string }

func (b *bench) targets() []target {
	var ts []target
	add := func(what string, s spread, ok bool, measured string) {
		ts = append(ts, target{verdictOf(ok, s), what, measured})
	}

	s := b.s1.get(keyDlock, mRatio)
	add("uncontended mean ≤ 1.2× two PINGs", s, s.med <= targetUncontended, "dlock "+s.format(fRatio)+", hand-written "+b.s1.get(keyHand, mRatio).format(fRatio))

	s = b.s2.get(keyDlock, mRatio)
	add(fmt.Sprintf("%d-goroutine throughput ≥ 1.5× the hand-written lock", b.cfg.goroutines), s, s.med >= targetDistinct, s.format(fRatio)+" ("+b.s2.get(keyDlock, mOps).format(fInt)+" vs "+b.s2.get(keyHand, mOps).format(fInt)+" ops/s)")

	s = b.s3.get(keyDlock, mTrips)
	add("hot name: ≤ 2.5 round trips per acquisition", s, s.med <= targetTrips, s.format(f2)+" round trips; "+b.s3.get(keyDlock, mCmds).format(f2)+" Redis commands incl. those inside scripts")

	s = b.s3.get(keyDlock, mWaitMax)
	add("hot name: max wait ≤ 100 ms (median of the per-round maxima)", s, s.med <= targetMaxWait, s.format(fDur)+fmt.Sprintf(" (worst round %s)", fDur(s.hi)))

	s = b.s3.get(keyDlock, mJain)
	add("hot name: Jain's index ≥ 0.95", s, s.med >= targetJain, s.format(f3))

	var ratios []float64
	d, h := b.s3[keyDlock][mOps], b.s3[keyHand][mOps]
	for i := range min(len(d), len(h)) {
		ratios = append(ratios, d[i]/h[i])
	}
	s = spreadOf(ratios)
	add("hot name: throughput ≥ the hand-written 1 ms poller's", s, s.med >= targetHotRatio, s.format(fRatio)+" ("+b.s3.get(keyDlock, mOps).format(fInt)+" vs "+b.s3.get(keyHand, mOps).format(fInt)+" acquisitions/s)")

	s = b.s4.get(keyDlock, mBytes)
	add("memory ≤ 200 B per held lock", s, s.med <= targetBytes, s.format(fInt)+" B")
	return ts
}

func (b *bench) settings(srv *redisServer) [][2]string {
	ctx := context.Background()
	redisVersion := noValue
	if s, err := b.admin.Info(ctx, "server").Result(); err == nil {
		redisVersion = parseInfo(s)["redis_version"]
	}
	deps := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = dlockTreeVersion
			}
			deps[d.Path] = v
		}
	}
	dlockVersion := deps["github.com/dlock-go/dlock"]
	if out, err := exec.Command("git", "-C", "..", "describe", "--always", "--dirty").Output(); err == nil {
		dlockVersion += ", " + strings.TrimSpace(string(out))
	}
	return [][2]string{
		{"Redis", "redis-server " + redisVersion + " on 127.0.0.1, no persistence (" + srv.cmd.Path + ")"},
		{"dlock", dlockVersion},
		{"go-redis", deps["github.com/redis/go-redis/v9"]},
		{"redsync", "github.com/go-redsync/redsync/v4 " + deps["github.com/go-redsync/redsync/v4"] + " (goredis v9 pool)"},
		{"bsm/redislock", deps["github.com/bsm/redislock"]},
		{"rounds", fmt.Sprintf("%d%s", b.cfg.rounds, map[bool]string{true: " (-quick smoke run: figures are rough)"}[b.cfg.quick])},
		{"durations per library per round", fmt.Sprintf("uncontended %v, distinct names %v, hot name %v", b.cfg.uncontended, b.cfg.distinct, b.cfg.hot)},
		{"goroutines", fmt.Sprintf("distinct names %d, hot name %d (2 processes)", b.cfg.goroutines, b.cfg.hotGoroutines)},
		{"critical section (hot name)", b.cfg.hold.String() + " busy wait"},
		{"lease (TTL)", fmt.Sprintf("%v for every library in scenarios 1–3; 1 h in scenario 4", b.cfg.ttl)},
		{"memory scenario", fmt.Sprintf("%d held locks, %d round(s)", b.cfg.memLocks, b.cfg.memRounds)},
		{"machine", fmt.Sprintf("%s, nproc %d, GOMAXPROCS %d, %s/%s", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)},
		{"Go", runtime.Version()},
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
