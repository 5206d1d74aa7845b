package soak

import (
	"sort"
	"strings"
	"time"
)

// Sample is one sampling of every figure, At after the workers started.
type Sample struct {
	At      time.Duration
	Figures map[string]float64
}

// Run is one backend's soak run as the runner recorded it.
type Run struct {
	Backend  string
	Duration time.Duration // of the workload
	Period   time.Duration // between samples
	Warmup   time.Duration // excluded from the growth fits, at the start and after recovery
	Short    bool          // the short mode (thresholds for a ~15 s run)
	Fault    string        // what was killed halfway
	Kill     time.Duration // when the fault began
	Up       time.Duration // when the server (or worker) was back
	// FaultErr is why the restart failed, "" if it did not.
	FaultErr string
	// Recovered is when every worker had acquired again after Up; 0 if
	// one never did.
	Recovered time.Duration
	// ForgetsOnRestart: the server loses its locks when killed (Redis
	// without persistence), so a hold across the restart may overlap.
	ForgetsOnRestart bool
	Samples          []Sample
	Totals           Snapshot           // the workers' counters, summed over every process
	Workers          int                // Lockers (processes)
	Left             map[string]float64 // server state once every Locker was closed
	Bounds           map[string]float64 // the documented bound of each Left figure
	BoundDocs        map[string]string  // where each bound is documented
	PeakBounds       map[string]float64 // bounds a figure must keep at every sample
	PeakDocs         map[string]string  // where each peak bound is documented
}

// faultWindow is when losses are the fault's: from a period before the
// kill to a TTL and a period after recovery (or the end of the run).
func (r *Run) faultWindow() (from, to time.Duration) {
	end := r.Recovered
	if end == 0 {
		end = r.Duration
	}
	return r.Kill - r.Period, end + TTL + r.Period
}

// figures returns the names of every sampled figure, sorted.
func (r *Run) figures() []string {
	seen := map[string]bool{}
	for _, s := range r.Samples {
		for k := range s.Figures {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// series returns figure's (time, value) points within [from, to].
func (r *Run) series(figure string, from, to time.Duration) (xs, ys []float64) {
	for _, s := range r.Samples {
		v, ok := s.Figures[figure]
		if ok && s.At >= from && s.At <= to {
			xs = append(xs, s.At.Seconds())
			ys = append(ys, v)
		}
	}
	return xs, ys
}

// Growth is a figure's least-squares fit over one phase.
type Growth struct {
	Figure         string
	Phase          string
	From, To       time.Duration
	Start, Growth  float64 // the fit's value at From and its rise to To
	Floor, RelFrac float64 // the thresholds it is judged by
}

// Fails reports whether the fitted growth exceeds both thresholds.
func (g Growth) Fails() bool {
	return g.Growth > g.Floor && g.Growth > g.RelFrac*max(g.Start, 1)
}

// floor returns the absolute growth floor of figure and whether figure
// is checked for growth at all (cumulative counters are not). The short
// mode fits a few seconds right after a 3 s warm-up, while pools, heaps
// and the race detector's shadow memory still fill up, so its floors on
// process figures are higher; its floor on server state counts is lower,
// since a leak has less time to show (ZooKeeper's ~20 k watches/min is
// ~1,500 in a phase).
func (r *Run) floor(figure string) (float64, bool) {
	type floors struct{ long, short float64 }
	var f floors
	switch {
	case strings.HasPrefix(figure, "server pss"):
		f = floors{32, 64}
	case strings.HasSuffix(figure, "rss MB"):
		f = floors{8, 64}
	case strings.HasSuffix(figure, "heap MB"):
		f = floors{8, 32}
	case strings.HasSuffix(figure, "goroutines"):
		f = floors{20, 64}
	case strings.HasSuffix(figure, "fds"):
		f = floors{10, 40}
	case strings.HasSuffix(figure, "connections"):
		f = floors{20, 64}
	case strings.HasSuffix(figure, " MB"):
		f = floors{8, 8}
	case strings.HasPrefix(figure, "state "):
		f = floors{1000, 300}
	default:
		return 0, false
	}
	if r.Short {
		return f.short, true
	}
	return f.long, true
}

// RelativeGrowth is the relative threshold of the growth check.
const RelativeGrowth = 0.25

// growths fits every checked figure over the two phases: after the
// warm-up until the kill, and after the recovery (plus the warm-up) until
// the end. A phase with fewer than 4 samples is not fitted.
func (r *Run) growths() []Growth {
	rec := r.Recovered
	if rec == 0 {
		rec = r.Duration
	}
	phases := []struct {
		name     string
		from, to time.Duration
	}{
		{"before restart", r.Warmup, r.Kill},
		{"after restart", rec + r.Warmup, r.Duration},
	}
	var out []Growth
	for _, f := range r.figures() {
		floor, ok := r.floor(f)
		if _, bounded := r.PeakBounds[f]; !ok || bounded {
			continue // a figure with a documented bound is judged by it (checkPeaks)
		}
		for _, p := range phases {
			xs, ys := r.series(f, p.from, p.to)
			if len(xs) < 4 {
				continue
			}
			slope, icept := fit(xs, ys)
			out = append(out, Growth{Figure: f, Phase: p.name, From: p.from, To: p.to,
				Start: icept + slope*p.from.Seconds(), Growth: slope * (p.to - p.from).Seconds(),
				Floor: floor, RelFrac: RelativeGrowth})
		}
	}
	return out
}

// fit returns the least-squares line through the points.
func fit(xs, ys []float64) (slope, intercept float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, sy / n
	}
	slope = (n*sxy - sx*sy) / d
	return slope, (sy - slope*sx) / n
}

// rate returns the acquisitions per second within [from, to], from the
// cumulative "acquired" figure.
func (r *Run) rate(from, to time.Duration) float64 {
	xs, ys := r.series("acquired", from, to)
	if len(xs) < 2 || xs[len(xs)-1] == xs[0] {
		return 0
	}
	return (ys[len(ys)-1] - ys[0]) / (xs[len(xs)-1] - xs[0])
}

// countIn returns how much the cumulative figure rose within [from, to]
// and outside it.
func (r *Run) countIn(figure string, from, to time.Duration) (in, out float64) {
	prev := 0.0
	for _, s := range r.Samples {
		v := s.Figures[figure]
		if d := v - prev; d > 0 {
			if s.At >= from && s.At <= to {
				in += d
			} else {
				out += d
			}
		}
		prev = v
	}
	return in, out
}
