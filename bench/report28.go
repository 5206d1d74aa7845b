package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dlock-go/dlock/sqllock"
)

// Targets for dlock from issue 28.
const (
	target28HandoffRatio = 3.0 // handoff p50 at 1,000 waiters / at 1, at most, on every backend
	target28CallsPerLock = 0.01
	target28HotRatio     = 1.0   // hot acquisitions/s / the 1 ms poller's, at least
	target28Bytes        = 147.0 // per held lock, at most: redsync's and bsm/redislock's when the issue was filed
)

// handoffRatio is st's handoff p50 at the most waiters over its p50 at
// one waiter (medians over rounds), and whether both were measured.
func (b *bench) handoffRatio(st string) (float64, bool) {
	a := b.scaleW.get(scaleKey(st, scaleWaiters[0]), mHandP50)
	z := b.scaleW.get(scaleKey(st, scaleWaiters[len(scaleWaiters)-1]), mHandP50)
	if a.n == 0 || z.n == 0 {
		return math.NaN(), false
	}
	return z.med / a.med, true
}

// maxOf is the largest value of metric over keys in fg, and whether any
// was measured.
func maxOf(fg figures, metric string, keys []string) (float64, bool) {
	v, ok := 0.0, false
	for _, k := range keys {
		if xs := fg[k][metric]; len(xs) > 0 {
			v, ok = max(v, slices.Max(xs)), true
		}
	}
	return v, ok
}

func (b *bench) targets28() []target {
	ts := []target{b.hotTarget(target28HotRatio), b.cpuTarget(), b.memoryTarget(target28Bytes)}
	var ratios []string
	worst, seen := 0.0, false
	for _, st := range b.scalingStores() {
		if r, ok := b.handoffRatio(st.name); ok {
			ratios = append(ratios, fmt.Sprintf("%s %s", st.name, fRatio(r)))
			worst, seen = max(worst, r), true
		}
	}
	s := spread{med: math.NaN()}
	if seen {
		s = spreadOf([]float64{worst})
	}
	ts = append(ts, target{verdictOf(worst <= target28HandoffRatio, s),
		fmt.Sprintf("handoff p50 at %d waiters ≤ 3× the 1-waiter p50 on every backend", scaleWaiters[len(scaleWaiters)-1]),
		strings.Join(ratios, ", ")})

	refused, measured, detail := b.refusals()
	s = spread{med: math.NaN()}
	if measured {
		s = spreadOf([]float64{refused})
	}
	ts = append(ts, target{verdictOf(refused == 0, s),
		"0 refused connections at the servers' default limits (MariaDB 151, PostgreSQL 100): waiters chart, 1,000 waiters in 10 processes on one name, 10,000 waiters on 1,000 names",
		detail})

	var calls []string
	worst, seen = 0.0, false
	for _, st := range b.scalingStores() {
		for _, k := range slices.Backward(renewHeld) {
			key := scaleKey(st.name, k)
			c := b.i28.renew.get(key, mRenewCalls)
			if c.n == 0 {
				continue
			}
			worst, seen = max(worst, c.med/float64(k)), true
			calls = append(calls, fmt.Sprintf("%s %d held: %s call(s), %s", st.name, k, fInt(c.med), b.i28.renew.get(key, mRenewTime).format(fDur)))
			break
		}
	}
	s = spread{med: math.NaN()}
	if seen {
		s = spreadOf([]float64{worst})
	}
	ts = append(ts, target{verdictOf(worst <= target28CallsPerLock, s),
		"renewal in batches on every backend: one renewal cycle of the most locks held takes at most 1 driver call per 100 locks (each driver batches again inside: section 8)",
		strings.Join(calls, "; ")})
	return ts
}

// refusals adds up the refused connections of every run on MariaDB and
// PostgreSQL (the server's counter where it has one, and the clients'
// errors), and describes them with the peak connections.
func (b *bench) refusals() (float64, bool, string) {
	total, measured := 0.0, false
	var parts []string
	for _, st := range []string{"MariaDB", "Postgres"} {
		var keys []string
		for _, n := range scaleWaiters {
			keys = append(keys, scaleKey(st, n))
		}
		var limitKeys []string
		for _, r := range limitRuns {
			limitKeys = append(limitKeys, limitKey(st, r.key))
		}
		srv, okS := sumOf(b.scaleW, mRefusedSrv, keys)
		srv2, okS2 := sumOf(b.i28.limits, mRefusedSrv, limitKeys)
		cli, okC := sumOf(b.scaleW, mRefusedCli, keys)
		cli2, okC2 := sumOf(b.i28.limits, mRefusedCli, limitKeys)
		peak, _ := maxOf(b.scaleW, mConnPeak, keys)
		peak2, _ := maxOf(b.i28.limits, mConnPeak, limitKeys)
		limit, _ := maxOf(b.i28.limits, mConnLimit, limitKeys)
		if !okC && !okC2 {
			continue
		}
		measured = true
		total += srv + srv2 + cli + cli2
		server := "no server counter"
		if okS || okS2 {
			server = fmt.Sprintf("server %.0f", srv+srv2)
		}
		parts = append(parts, fmt.Sprintf("%s: %s, clients %.0f; peak %.0f connections (waiters chart), %.0f (10 processes) of %.0f",
			st, server, cli+cli2, peak, peak2, limit))
	}
	return total, measured, strings.Join(parts, "; ")
}

// sumOf adds every value of metric over keys in fg.
func sumOf(fg figures, metric string, keys []string) (float64, bool) {
	v, ok := 0.0, false
	for _, k := range keys {
		for _, x := range fg[k][metric] {
			v, ok = v+x, true
		}
	}
	return v, ok
}

// writeConnections renders the SQL servers' connection counters of the
// waiters chart and the default-limit runs.
func (b *bench) writeConnections(p func(string, ...any)) {
	p("### Connections at the SQL servers\n\n")
	p("MariaDB and PostgreSQL run at their default `max_connections` (151 and 100). Around each run the bench reads the server's own counters over a connection of its own (included in the figures): MariaDB `SHOW GLOBAL STATUS` (`FLUSH STATUS` before the run; Threads_connected sampled every 50 ms, Max_used_connections; Connection_errors_max_connections, the refusals for lack of connections, and Aborted_connects, failed connection attempts of any cause, as deltas), PostgreSQL `pg_stat_activity` (client backends, sampled every 50 ms). PostgreSQL counts no refusal: refused connections are the clients' errors with SQLSTATE 53300 (\"too many clients\"), and on MariaDB error 1040 too. Median (min–max) over rounds.\n\n")
	p("| store | run | peak connections | Max_used_connections | refused (server) | Aborted_connects | refused (clients) |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, st := range []string{"MariaDB", "Postgres"} {
		for _, n := range scaleWaiters {
			k := scaleKey(st, n)
			p("| %s | %d waiters, %d processes | %s | %s | %s | %s | %s |\n", st, n, scaleProcs, b.scaleW.get(k, mConnPeak).format(fInt),
				b.scaleW.get(k, mConnMax).format(fInt), b.scaleW.get(k, mRefusedSrv).format(fInt), b.scaleW.get(k, mAborted).format(fInt), b.scaleW.get(k, mRefusedCli).format(fInt))
		}
	}
	p("\n### At the default connection limits, %d processes\n\n", limitProcs)
	p("%d processes (this one and workers), each with one Locker opened by store URL with the default pool (sqllock `max_conns` %d), for %v after the queue forms; each contender loops acquire, %v busy wait, release. 1,000 waiters: 1,001 contenders on one name; 10,000 waiters: 10,000 contenders, 10 per name (one per process) on 1,000 names. Median (min–max) over rounds.\n\n", limitProcs, sqllock.DefaultMaxConns, b.cfg.scaleDur, b.cfg.hold)
	p("| store | run | acquisitions | handoff p50 | peak connections | Max_used_connections | max_connections | refused (server) | Aborted_connects | refused (clients) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, st := range []string{"MariaDB", "Postgres"} {
		for _, r := range limitRuns {
			k := limitKey(st, r.key)
			fg := b.i28.limits
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", st, r.what, fg.get(k, mAcqs).format(fInt), fg.get(k, mHandP50).format(fDur),
				fg.get(k, mConnPeak).format(fInt), fg.get(k, mConnMax).format(fInt), fg.get(k, mConnLimit).format(fInt),
				fg.get(k, mRefusedSrv).format(fInt), fg.get(k, mAborted).format(fInt), fg.get(k, mRefusedCli).format(fInt))
		}
	}
	p("\n")
}

// writeRenewal renders the renewal runs.
func (b *bench) writeRenewal(p func(string, ...any)) {
	p("### Renewal of locks held by one Locker\n\n")
	p("One Locker takes k distinct names (%d goroutines, %v lease: the core renews every TTL/3; on the SQL stores, in a second run, as shared holds, which they renew apart) and, once it holds them, the bench adds up the `Renewed` hook's batches (one `driver.Refresh` call each, `hook.Renewal.Duration` measured by the core around the call, loopback) until every lock was renewed once: the driver calls and their total time for one renewal cycle, and the largest call. Inside a call each driver batches again: Redis pipelines, the SQL stores send one statement per 200 exclusive leases and one transaction per 200 shared holds or permits, etcd checks the locks' keys in one transaction per 128 (their leases are the session's, which its keep-alive renews), ZooKeeper checks the locks' ephemeral nodes with one multi request of check operations per 1,000 (one transaction each), all pipelined on the session's connection (the session's heartbeats keep the nodes). k up to %d (`-scale-held`)%s. One run.\n\n", *fillWorkers, renewTTL, b.cfg.scaleHeld, b.capsText())
	renewHeader(p, "%d held: time (calls, largest)")
	b.renewRows(p, func(key string) string {
		if b.i28.renew.get(key, mRenewCalls).n == 0 {
			return noValue
		}
		cell := fmt.Sprintf("%s (%s, %s)", b.i28.renew.get(key, mRenewTime).format(fDur), b.i28.renew.get(key, mRenewCalls).format(fInt), b.i28.renew.get(key, mRenewMax).format(fInt))
		lost, failed := b.i28.renew.get(key, mRenewLost), b.i28.renew.get(key, mRenewFail)
		if lost.med+failed.med > 0 {
			cell += fmt.Sprintf(" **%s lost, %s failed**", lost.format(fInt), failed.format(fInt))
		}
		return cell
	}, nil)
	p("\n")
	b.writeFill(p)
}

// renewHeader renders a renewal table's header: a column per k of
// renewHeld, titled by the format col of k, then the extra columns.
func renewHeader(p func(string, ...any), col string, extra ...string) {
	p("| store |")
	for _, k := range renewHeld {
		p(" "+col+" |", k)
	}
	for _, e := range extra {
		p(" %s |", e)
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(renewHeld)+len(extra)))
}

// renewRows renders the rows of a renewal table: one per store, and one
// more for the SQL stores' shared holds, with a cell(key) for each k of
// renewHeld, then last(keys) if last is not nil.
func (b *bench) renewRows(p func(string, ...any), cell func(key string) string, last func(keys []string) string) {
	for _, st := range b.scalingStores() {
		for _, shared := range []bool{false, true} {
			if shared && !slices.Contains(renewSharedStores, st.name) {
				continue
			}
			p("| %s |", strings.TrimSuffix(renewKey(st.name, shared, 0), "/0"))
			var keys []string
			for _, k := range renewHeld {
				key := renewKey(st.name, shared, k)
				keys = append(keys, key)
				p(" %s |", cell(key))
			}
			if last != nil {
				p(" %s |", last(keys))
			}
			p("\n")
		}
	}
}

// writeFill renders how long the renewal runs took to fill their Locker
// and to close it.
func (b *bench) writeFill(p func(string, ...any)) {
	p("The cost of the runs above: the time to take the k names (%d goroutines of the one Locker; cumulative) and the release of the locks after the largest k (as many goroutines; on Redis a FLUSHALL instead).\n\n", *fillWorkers)
	renewHeader(p, "fill to %d", "release")
	b.renewRows(p, func(key string) string {
		if b.i28.renew.get(key, mFillTime).n == 0 {
			return noValue
		}
		return b.i28.renew.get(key, mFillTime).format(fDur)
	}, func(keys []string) string {
		for _, key := range slices.Backward(keys) {
			if c := b.i28.renew.get(key, mCloseTime); c.n > 0 {
				return c.format(fDur)
			}
		}
		return noValue
	})
	p("\n")
}

// capsText says where -scale-held-caps lowered -scale-held, and why.
func (b *bench) capsText() string {
	var caps []string
	for _, st := range b.scalingStores() {
		if n := b.heldCap(st.name); n < b.cfg.scaleHeld {
			caps = append(caps, fmt.Sprintf("%d on %s", n, st.name))
		}
	}
	if len(caps) == 0 {
		return " on every store"
	}
	return ", except " + strings.Join(caps, ", ") + " (`-scale-held-caps`: taking 100,000 names costs minutes there; see bench/README.md for a run at 100,000)"
}
