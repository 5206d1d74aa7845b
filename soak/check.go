package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// MaxThroughputDrop is the throughput check's bound: the last window's
// rate may be at most this fraction below the first's. The short mode's
// windows are a few seconds on a shared 2-core machine, so its bound is
// looser (ShortThroughputDrop).
const (
	MaxThroughputDrop   = 0.20
	ShortThroughputDrop = 0.50
)

// Verdict is one check's outcome on one run.
type Verdict struct {
	Check  string
	Pass   bool
	Detail string // what was measured; on failure, why it failed
	// Info marks a verdict that is reported, not judged: a speed measured
	// in the short mode, whose windows of a few seconds on a shared
	// 2-core machine say more of the machine's other load than of the
	// store (the guide keeps speeds out of timed assertions). The long
	// soak judges it.
	Info bool
}

// Checks judges the run: growth, state left, refused connections,
// throughput and exclusion.
func (r *Run) Checks() []Verdict {
	return []Verdict{r.checkGrowth(), r.checkPeaks(), r.checkLeft(), r.checkConnections(), r.checkThroughput(), r.checkExclusion(), r.checkRecovery()}
}

// checkRecovery checks that the server came back and every worker
// acquired again.
func (r *Run) checkRecovery() Verdict {
	v := Verdict{Check: "recovered after the fault", Pass: true, Detail: r.RecoveryTime()}
	if r.FaultErr != "" {
		msg, _, _ := strings.Cut(r.FaultErr, "\n")
		v.Pass, v.Detail = false, "the restart failed: "+msg
	} else if r.Recovered == 0 {
		v.Pass, v.Detail = false, "a worker never acquired again after the restart"
	}
	return v
}

func (r *Run) checkGrowth() Verdict {
	v := Verdict{Check: "no steady growth", Pass: true}
	var bad []string
	n := 0
	for _, g := range r.growths() {
		n++
		if g.Fails() {
			bad = append(bad, fmt.Sprintf("%s grew %s -> %s (+%.0f%%) %s (%v-%v; thresholds +%s and +%.0f%%)",
				g.Figure, num(g.Start), num(g.Start+g.Growth), 100*g.Growth/max(g.Start, 1), g.Phase,
				g.From.Round(time.Second), g.To.Round(time.Second), num(g.Floor), 100*g.RelFrac))
		}
	}
	if n == 0 {
		return Verdict{Check: v.Check, Detail: "no phase long enough to fit (need 4 samples after the warm-up)"}
	}
	if len(bad) > 0 {
		v.Pass, v.Detail = false, strings.Join(bad, "; ")
	} else {
		v.Detail = fmt.Sprintf("%d fits within thresholds", n)
	}
	return v
}

// checkPeaks checks the figures a backend bounds at every moment (the
// ZooKeeper watches); a backend without such bounds passes with nothing
// to say.
func (r *Run) checkPeaks() Verdict {
	v := Verdict{Check: "bounded at every sample", Pass: true, Detail: "no per-sample bound documented"}
	var bad, all []string
	for _, f := range sortedKeys(r.PeakBounds) {
		_, ys := r.series(f, 0, r.Duration)
		peak, at := 0.0, -1
		for i, y := range ys {
			if y > peak {
				peak, at = y, i
			}
		}
		all = append(all, fmt.Sprintf("%s peak %s (bound %s)", f, num(peak), num(r.PeakBounds[f])))
		if at >= 0 && peak > r.PeakBounds[f] {
			bad = append(bad, fmt.Sprintf("%s reached %s (first sample %s), want <= %s (%s)", f, num(peak), num(ys[0]), num(r.PeakBounds[f]), r.PeakDocs[f]))
		}
	}
	if len(bad) > 0 {
		v.Pass, v.Detail = false, strings.Join(bad, "; ")
	} else if len(all) > 0 {
		v.Detail = strings.Join(all, ", ")
	}
	return v
}

func (r *Run) checkLeft() Verdict {
	v := Verdict{Check: "server state bounded after Close", Pass: true}
	var bad, all []string
	keys := make([]string, 0, len(r.Bounds))
	for k := range r.Bounds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, ok := r.Left[k]
		all = append(all, fmt.Sprintf("%s %s (bound %s)", k, num(got), num(r.Bounds[k])))
		if !ok || got > r.Bounds[k] {
			bad = append(bad, fmt.Sprintf("%s = %s, want <= %s (%s)", k, num(got), num(r.Bounds[k]), r.BoundDocs[k]))
		}
	}
	if len(keys) == 0 {
		return Verdict{Check: v.Check, Detail: "no bound measured"}
	}
	if len(bad) > 0 {
		v.Pass, v.Detail = false, strings.Join(bad, "; ")
	} else {
		v.Detail = strings.Join(all, ", ")
	}
	return v
}

func (r *Run) checkConnections() Verdict {
	v := Verdict{Check: "no refused connection", Pass: true}
	n := r.Totals.Errors["too many connections"] + r.Totals.Errors["release: too many connections"]
	if n > 0 {
		v.Pass = false
		v.Detail = fmt.Sprintf("%d errors for too many connections at the server's default limit, e.g. %q", n,
			firstOf(r.Totals.Messages, "too many connections", "release: too many connections"))
	} else {
		v.Detail = "0 too-many-connections errors"
	}
	return v
}

// throughputWindows returns the first and last windows compared: the
// first and last minute (short mode: fifth) of the run, the last one
// starting after the recovery.
func (r *Run) throughputWindows() (a0, a1, b0, b1 time.Duration) {
	l := time.Minute
	if r.Short {
		l = r.Duration / 5
	}
	b0 = max(r.Duration-l, r.Recovered)
	if b0 > r.Duration-2*r.Period {
		b0 = r.Duration - 2*r.Period
	}
	return 0, l, b0, r.Duration
}

func (r *Run) checkThroughput() Verdict {
	v := Verdict{Check: "throughput kept", Pass: true, Info: r.Short}
	a0, a1, b0, b1 := r.throughputWindows()
	first, last := r.rate(a0, a1), r.rate(b0, b1)
	bound := MaxThroughputDrop
	if r.Short {
		bound = ShortThroughputDrop
	}
	v.Detail = fmt.Sprintf("%.0f/s (%v-%v) -> %.0f/s (%v-%v), bound -%.0f%%", first, a0, a1.Round(time.Second),
		last, b0.Round(time.Second), b1.Round(time.Second), 100*bound)
	if first == 0 && last > 0 {
		v.Detail += " (no acquisition in the first window: the store was slow to start)"
	} else if first == 0 || last < (1-bound)*first {
		v.Pass = false
		v.Detail = "throughput fell: " + v.Detail
	}
	return v
}

func (r *Run) checkExclusion() Verdict {
	v := Verdict{Check: "exclusion held, no lock lost outside the fault", Pass: true}
	from, to := r.faultWindow()
	lostIn, lostOut := r.countIn("lost", from, to)
	violIn, violOut := r.countIn("violations", from, to)
	v.Detail = fmt.Sprintf("violations %.0f (%.0f during the fault), locks lost %.0f outside the fault, %.0f during it (%v-%v)",
		violIn+violOut, violIn, lostOut, lostIn, from.Round(time.Second), to.Round(time.Second))
	if violOut > 0 || lostOut > 0 || (violIn > 0 && !r.ForgetsOnRestart) {
		v.Pass = false
	}
	return v
}

// Failed reports whether any check failed.
func Failed(vs []Verdict) bool {
	for _, v := range vs {
		if !v.Pass {
			return true
		}
	}
	return false
}

func firstOf(m map[string]string, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k]; ok {
			return s
		}
	}
	return ""
}

// num formats a figure compactly.
func num(f float64) string {
	switch {
	case f == float64(int64(f)):
		return fmt.Sprintf("%d", int64(f))
	case f >= 100 || f <= -100:
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.2f", f)
}
