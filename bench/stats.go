package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0..100) of sorted, nearest rank.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// spread is one figure across rounds.
type spread struct {
	med, lo, hi float64
	n           int
}

func spreadOf(xs []float64) spread {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return spread{med: math.NaN(), lo: math.NaN(), hi: math.NaN()}
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{med: med, lo: v[0], hi: v[len(v)-1], n: len(v)}
}

// format renders the spread as "median (min–max)" with f formatting each
// number.
func (s spread) format(f func(float64) string) string {
	if s.n == 0 {
		return "–"
	}
	if s.n == 1 || s.lo == s.hi {
		return f(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.med), f(s.lo), f(s.hi))
}

// Number formats.
func fDur(ns float64) string { // a duration given in ns
	d := time.Duration(ns)
	switch {
	case math.IsNaN(ns):
		return "–"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", ns/1e6)
	default:
		return fmt.Sprintf("%.2f s", ns/1e9)
	}
}

func fRatio(x float64) string { return fmt.Sprintf("%.2f×", x) }
func f2(x float64) string     { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string     { return fmt.Sprintf("%.3f", x) }
func fInt(x float64) string   { return fmt.Sprintf("%.0f", x) }
func fPct(x float64) string   { return fmt.Sprintf("%.0f%%", x*100) }
