package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
)

// The charts are plain SVG written here: no plotting dependency.

var palette = map[string]string{
	keyHand:         "#7f7f7f",
	keyDlock:        "#d62728",
	keyRedsync:      "#1f77b4",
	keyRedsync1ms:   "#17becf",
	keyBsm:          "#2ca02c",
	keyBsm1ms:       "#bcbd22",
	keyDlockRueidis: "#ff7f0e",
	keyRueidislock:  "#9467bd",
}

type svg struct{ strings.Builder }

func newSVG(w, h int) *svg {
	s := &svg{}
	fmt.Fprintf(s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(s, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	return s
}

func (s *svg) text(x, y float64, anchor, style, t string) {
	fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, style, html.EscapeString(t))
}

func (s *svg) line(x1, y1, x2, y2 float64, style string) {
	fmt.Fprintf(s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x1, y1, x2, y2, style)
}

func (s *svg) write(path string) error {
	s.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(s.String()), 0o644)
}

// barRow is one bar of a horizontal bar chart: a median with a min–max
// whisker.
type barRow struct {
	label, color string
	s            spread
}

// ratioChart draws horizontal bars with whiskers and dashed reference
// lines at refs (value -> label).
func ratioChart(path, title, axis string, rows []barRow, refs map[float64]string, format func(float64) string) error {
	const (
		w, left, right, top, rowH = 760, 170, 50, 70, 34
	)
	h := top + rowH*len(rows) + 50
	hi := 0.0
	for _, r := range rows {
		if !math.IsNaN(r.s.hi) {
			hi = max(hi, r.s.hi)
		}
	}
	for v := range refs {
		hi = max(hi, v)
	}
	hi = niceCeil(hi * 1.1)
	x := func(v float64) float64 { return left + v/hi*float64(w-left-right) }
	s := newSVG(w, h)
	s.text(w/2, 24, "middle", `font-size="15" font-weight="bold"`, title)
	bottom := float64(top + rowH*len(rows))
	for i := 0; i <= 5; i++ { // grid
		v := hi * float64(i) / 5
		s.line(x(v), top-6, x(v), bottom, `stroke="#ddd"`)
		s.text(x(v), bottom+16, "middle", `fill="#444"`, trimFloat(v))
	}
	s.text((left+w-right)/2, bottom+36, "middle", `fill="#444"`, axis)
	for i, r := range rows {
		y := float64(top + i*rowH)
		s.text(left-8, y+rowH/2+4, "end", "", r.label)
		if r.s.n == 0 {
			continue
		}
		fmt.Fprintf(s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.85"/>`+"\n", x(0), y+7, x(r.s.med)-x(0), float64(rowH-14), r.color)
		s.line(x(r.s.lo), y+rowH/2, x(r.s.hi), y+rowH/2, `stroke="black" stroke-width="1.5"`)
		s.line(x(r.s.lo), y+10, x(r.s.lo), y+rowH-10, `stroke="black" stroke-width="1.5"`)
		s.line(x(r.s.hi), y+10, x(r.s.hi), y+rowH-10, `stroke="black" stroke-width="1.5"`)
		s.text(x(r.s.hi)+6, y+rowH/2+4, "start", `fill="#222"`, format(r.s.med))
	}
	vs := make([]float64, 0, len(refs))
	for v := range refs {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	for i, v := range vs { // labels staggered so close lines stay readable
		s.line(x(v), top-8-float64(i%2)*14, x(v), bottom, `stroke="#333" stroke-dasharray="5,4"`)
		s.text(x(v)+3, top-10-float64(i%2)*14, "start", `fill="#333" font-size="11"`, refs[v])
	}
	return s.write(path)
}

// cdfSeries is one library's waits: completed (sorted) and callers still
// waiting at the stop, which count in the total but never complete.
type cdfSeries struct {
	label, color string
	waits        []int64
	censored     int
}

// cdfChart draws, per series, the share of lock calls that had the lock
// within x, on a log time axis.
func cdfChart(path, title string, series []cdfSeries, mark float64, markLabel string) error {
	const (
		w, left, right, top, ph0 = 760, 70, 30, 50, 330
	)
	lo, hi := 1e4, 1e7 // 10 µs .. 10 ms, widened to the data
	for _, c := range series {
		if len(c.waits) > 0 {
			lo = min(lo, math.Max(float64(c.waits[0]), 1e3))
			hi = max(hi, float64(c.waits[len(c.waits)-1]))
		}
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	h := top + ph0 + 80 + 18*len(series)
	pw, ph := float64(w-left-right), float64(ph0)
	x := func(ns float64) float64 {
		ns = math.Min(math.Max(ns, lo), hi)
		return left + (math.Log10(ns)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*pw
	}
	y := func(p float64) float64 { return top + (1-p)*ph }
	s := newSVG(w, h)
	s.text(w/2, 24, "middle", `font-size="15" font-weight="bold"`, title)
	for d := lo; d <= hi*1.001; d *= 10 {
		s.line(x(d), top, x(d), top+ph, `stroke="#ddd"`)
		s.text(x(d), top+ph+16, "middle", `fill="#444"`, fDur(d))
	}
	for i := 0; i <= 4; i++ {
		p := float64(i) / 4
		s.line(left, y(p), left+pw, y(p), `stroke="#ddd"`)
		s.text(left-6, y(p)+4, "end", `fill="#444"`, fmt.Sprintf("%.0f%%", p*100))
	}
	s.text(left+pw/2, top+ph+36, "middle", `fill="#444"`, "wait from lock call to acquired (log scale)")
	s.text(16, top+ph/2, "middle", fmt.Sprintf(`fill="#444" transform="rotate(-90 16 %.1f)"`, top+ph/2), "share of lock calls")
	if mark > 0 {
		s.line(x(mark), top, x(mark), top+ph, `stroke="#333" stroke-dasharray="5,4"`)
		s.text(x(mark)+3, top+12, "start", `fill="#333" font-size="11"`, markLabel)
	}
	s.text(left, float64(top+ph0+60+18*len(series)), "start", `fill="#444" font-size="11"`,
		"A curve ends below 100% by the calls still waiting when a round stopped (their wait has no end).")
	for i, c := range series {
		total := len(c.waits) + c.censored
		if total == 0 {
			continue
		}
		var pts []string
		step := max(1, len(c.waits)/400) // at most ~400 points per curve
		prev := 0.0
		for j := 0; j < len(c.waits); j += step {
			p := float64(j+1) / float64(total)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(float64(c.waits[j])), y(prev), x(float64(c.waits[j])), y(p)))
			prev = p
		}
		last := float64(len(c.waits)) / float64(total)
		if len(c.waits) > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(c.waits[len(c.waits)-1])), y(last)))
		}
		fmt.Fprintf(s, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c.color, strings.Join(pts, " "))
		ly := float64(top+ph0+60) + float64(i)*18
		lx := float64(left)
		s.line(lx, ly-4, lx+24, ly-4, fmt.Sprintf(`stroke="%s" stroke-width="3"`, c.color))
		label := c.label
		if c.censored > 0 {
			label += fmt.Sprintf(" (%d still waiting)", c.censored)
		}
		s.text(lx+30, ly, "start", "", label)
	}
	return s.write(path)
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// lineSeries is one line of a lineChart: a value (median, with a min–max
// whisker) per x; a NaN median leaves a gap.
type lineSeries struct {
	label, color string
	dashed       bool
	ys           []spread
}

// lineChart draws series over xs on log-log axes (both positive), with
// whiskers at each point.
func lineChart(path, title, xAxis, yAxis string, xs []float64, series []lineSeries, format func(float64) string) error {
	const (
		w, left, right, top, ph0 = 760, 80, 30, 50, 330
	)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sr := range series {
		for _, y := range sr.ys {
			for _, v := range []float64{y.lo, y.hi} {
				if v > 0 && !math.IsNaN(v) {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	x0, x1 := xs[0], xs[len(xs)-1]
	h := top + ph0 + 70 + 18*len(series)
	pw, ph := float64(w-left-right), float64(ph0)
	x := func(v float64) float64 {
		if x1 == x0 {
			return left + pw/2
		}
		return left + (math.Log10(v)-math.Log10(x0))/(math.Log10(x1)-math.Log10(x0))*pw
	}
	y := func(v float64) float64 {
		v = math.Min(math.Max(v, lo), hi)
		return top + (1-(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))*ph
	}
	s := newSVG(w, h)
	s.text(w/2, 24, "middle", `font-size="15" font-weight="bold"`, title)
	for _, v := range xs {
		s.line(x(v), top, x(v), top+ph, `stroke="#ddd"`)
		s.text(x(v), top+ph+16, "middle", `fill="#444"`, trimFloat(v))
	}
	for d := lo; d <= hi*1.001; d *= 10 {
		s.line(left, y(d), left+pw, y(d), `stroke="#ddd"`)
		s.text(left-6, y(d)+4, "end", `fill="#444"`, format(d))
	}
	s.text(left+pw/2, top+ph+36, "middle", `fill="#444"`, xAxis)
	s.text(16, top+ph/2, "middle", fmt.Sprintf(`fill="#444" transform="rotate(-90 16 %.1f)"`, top+ph/2), yAxis)
	for i, sr := range series {
		style := fmt.Sprintf(`stroke="%s" stroke-width="2"`, sr.color)
		if sr.dashed {
			style += ` stroke-dasharray="6,4"`
		}
		var pts []string
		for j, v := range sr.ys {
			if j >= len(xs) || math.IsNaN(v.med) || v.med <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xs[j]), y(v.med)))
			s.line(x(xs[j]), y(v.lo), x(xs[j]), y(v.hi), fmt.Sprintf(`stroke="%s" stroke-width="1"`, sr.color))
			fmt.Fprintf(s, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(xs[j]), y(v.med), sr.color)
		}
		if len(pts) > 1 {
			fmt.Fprintf(s, `<polyline fill="none" %s points="%s"/>`+"\n", style, strings.Join(pts, " "))
		}
		ly := float64(top+ph0+60) + float64(i)*18
		s.line(left, ly-4, left+24, ly-4, style)
		s.text(left+30, ly, "start", "", sr.label)
	}
	return s.write(path)
}

// storePalette colours the backends in the scaling charts.
var storePalette = map[string]string{
	"Redis":     "#d62728",
	"MariaDB":   "#ff7f0e",
	"Postgres":  "#1f77b4",
	"SQLite":    "#2ca02c",
	"ZooKeeper": "#9467bd",
	"etcd":      "#8c564b",
}
