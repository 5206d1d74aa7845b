package jepsen

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Report collects the results of runs and writes them as Markdown: a
// table per target, a row per nemesis.
type Report struct {
	mu      sync.Mutex
	results []Result
}

// Add records r.
func (rep *Report) Add(r Result) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.results = append(rep.results, r)
}

// WriteFile writes the report to path, creating its directory.
func (rep *Report) WriteFile(path, title string) error {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		if err := os.MkdirAll(path[:i], 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep.Write(f, title)
	return f.Close()
}

// Write writes the report to w.
func (rep *Report) Write(w io.Writer, title string) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	byTarget := map[string][]Result{}
	var targets []string
	for _, r := range rep.results {
		if byTarget[r.Target] == nil {
			targets = append(targets, r.Target)
		}
		byTarget[r.Target] = append(byTarget[r.Target], r)
	}
	sort.Strings(targets)
	fmt.Fprintf(w, "# %s\n\n", title)
	for _, t := range targets {
		fmt.Fprintf(w, "## %s\n\n", t)
		fmt.Fprintln(w, "| nemesis | duration | acquisitions | writes accepted | ops refused (stale fence) | ops checked | linearizable | violations | token inversions | token inversions expected (documented) | fenced overlaps | max stale belief after resume | max re-acquire after a holder died |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range byTarget[t] {
			fmt.Fprintf(w, "| %s | %v | %d | %d | %d | %d | %s | %d | %d | %d | %d | %s | %s |\n",
				r.Nemesis, r.Duration.Round(100*time.Millisecond), r.Acquisitions, r.Accepted, r.Rejected, r.Ops,
				r.Linearizable, len(r.Violations), r.TokenInversions, r.ExpectedInversions, r.Overlaps, dash(r.MaxStale), dash(r.MaxReacquire))
		}
		for _, r := range byTarget[t] {
			for _, v := range r.Violations {
				fmt.Fprintf(w, "\n- %s: %s", r.Nemesis, v)
			}
		}
		fmt.Fprintln(w)
	}
}

func dash(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return d.Round(time.Millisecond).String()
}
