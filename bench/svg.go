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
	keyHand:       "#7f7f7f",
	keyDlock:      "#d62728",
	keyRedsync:    "#1f77b4",
	keyRedsync1ms: "#17becf",
	keyBsm:        "#2ca02c",
	keyBsm1ms:     "#bcbd22",
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
