package soak_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/soak"
)

// run starts the workers, samples them and the server until r.Duration,
// with the fault halfway, then stops the workers and measures the state
// left on the server.
func run(t *testing.T, tg *target, r *soak.Run, dir string) {
	table := filepath.Join(dir, "exclusion")
	tab, err := soak.OpenTable(table)
	if err != nil {
		t.Fatalf("OpenTable(%q) = %v", table, err)
	}
	defer tab.Close()
	prepare(t, tg.url)
	f := &fleet{t: t, url: tg.url, table: table, dir: dir, period: r.Period}
	for w := range workers {
		f.start(w)
	}
	for w := range workers {
		f.procs[w].Expect(t, "ready", time.Minute)
	}
	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	tick := time.NewTicker(r.Period)
	defer tick.Stop()
	faulted := false
	// The run lasts r.Duration, longer if the recovery ends so late that
	// the phase after it would have no room for the warm-up and four
	// samples (half as long again if a worker never recovers).
	end := func() time.Duration {
		switch {
		case !faulted:
			return r.Duration
		case r.Recovered == 0:
			return r.Duration * 3 / 2
		}
		return max(r.Duration, r.Recovered+r.Warmup+4*r.Period)
	}
	for since() < end() {
		<-tick.C
		if !faulted && since() >= r.Duration/2 {
			faulted = true
			r.Kill = since()
			r.FaultErr = fault(t, tg, f, tab)
			r.Up = since()
			tab.SetRestarted(time.Now().UnixNano())
		}
		r.Samples = append(r.Samples, sample(tg, f, since()))
		if r.Recovered == 0 && faulted {
			r.Recovered = recovered(f, start)
		}
	}
	r.Duration = r.Samples[len(r.Samples)-1].At
	stop(t, f)
	r.Totals = f.totals()
	r.Samples = append(r.Samples, soak.Sample{At: since(), Figures: map[string]float64{
		"acquired": float64(r.Totals.Acquired), "lost": float64(r.Totals.Lost), "violations": float64(r.Totals.Violations)}})
	if tg.left != nil {
		r.Left, r.Bounds, r.BoundDocs = tg.left(t)
	}
}

// prepare takes and releases one name with a Locker of its own before
// the workers start, so that the store's tables exist (sqllock creates
// them on first use), as an application's deploy step would. Without it,
// 128 goroutines racing to create the tables of a new SQLite file under
// a 2 s deadline never get past CREATE TABLE (see the report).
func prepare(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l, err := dlock.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%q) = %v", url, err)
	}
	defer l.Close()
	k, err := l.Acquire(ctx, "soak-prepare")
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lock", "soak-prepare", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", "soak-prepare", err)
	}
}

// fault kills the server with -9 and restarts it, or, for a store
// without a server, kills worker 0 with -9 and starts it again. A
// restart that fails (the server does not answer in time, as under a
// storm of reconnections) is returned, not fatal, so that the run goes
// on and reports it.
func fault(t *testing.T, tg *target, f *fleet, tab *soak.Table) (failed string) {
	t.Helper()
	if tg.restart != nil {
		ft := &fatalTB{TB: t}
		defer func() {
			if p := recover(); p != nil {
				if p != ft {
					panic(p)
				}
				failed = ft.msg
			}
		}()
		tg.restart(ft)
		return ""
	}
	f.procs[0].Kill(t)
	tab.Forget(0)
	f.start(0)
	f.procs[0].Expect(t, "ready", time.Minute)
	return ""
}

// fatalTB turns Fatal and Fatalf into a panic with itself, which fault
// recovers.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	panic(f)
}

// recovered returns when every worker had acquired since the restart
// mark, 0 if one has not yet.
func recovered(f *fleet, start time.Time) time.Duration {
	var latest int64
	for w := range workers {
		s, ok := last(f.files[w][len(f.files[w])-1])
		if !ok || s.FirstOK == 0 {
			return 0
		}
		latest = max(latest, s.FirstOK)
	}
	return time.UnixMilli(latest).Sub(start)
}

// stop asks every worker to close its Locker and exit, and waits.
func stop(t *testing.T, f *fleet) {
	t.Helper()
	for _, p := range f.procs {
		p.Signal(t, syscall.SIGTERM)
	}
	for w, p := range f.procs {
		if err := p.Wait(t, 2*time.Minute); err != nil {
			t.Errorf("soak worker %d exited with %v; stderr:\n%s", w, err, p.Stderr())
		}
	}
}

// sample reads every worker's latest snapshot, the server's figures and
// its memory.
func sample(tg *target, f *fleet, at time.Duration) soak.Sample {
	s := soak.Sample{At: at, Figures: map[string]float64{}}
	tot := f.totals()
	s.Figures["acquired"] = float64(tot.Acquired)
	s.Figures["lost"] = float64(tot.Lost)
	s.Figures["violations"] = float64(tot.Violations)
	s.Figures["errors"] = 0
	for _, n := range tot.Errors {
		s.Figures["errors"] += float64(n)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		var load float64
		fmt.Sscan(string(b), &load)
		s.Figures["host load1"] = load
	}
	for w := range workers {
		ws, ok := last(f.files[w][len(f.files[w])-1])
		if !ok {
			continue
		}
		s.Figures[fmt.Sprintf("worker %d rss MB", w)] = float64(ws.RSSKB) / 1024
		s.Figures[fmt.Sprintf("worker %d heap MB", w)] = float64(ws.HeapKB) / 1024
		s.Figures[fmt.Sprintf("worker %d goroutines", w)] = float64(ws.Goroutines)
		s.Figures[fmt.Sprintf("worker %d fds", w)] = float64(ws.FDs)
	}
	if tg.pids != nil {
		if kb := pssKB(tg.pids()); kb > 0 {
			s.Figures["server pss MB"] = float64(kb) / 1024
		}
	}
	if tg.probe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for k, v := range tg.probe(ctx) {
			s.Figures[k] = v
		}
	}
	return s
}

// pssKB sums the proportional set sizes of pids (smaps_rollup's Pss),
// which counts a page shared by several of them (PostgreSQL's shared
// buffers) once, where a sum of their resident sets would count it in
// every backend that touched it.
func pssKB(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				sum += n
			}
		}
	}
	return sum
}
