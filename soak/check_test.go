package soak_test

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/soak"
)

// synthetic returns a 15 s short-mode run sampled every second, with the
// server restarted at 7 s and back at 8 s, whose figure follows f.
func synthetic(figure string, f func(at time.Duration) float64) *soak.Run {
	r := &soak.Run{Backend: "synthetic", Duration: 15 * time.Second, Period: time.Second, Warmup: 3 * time.Second,
		Short: true, Kill: 7 * time.Second, Up: 8 * time.Second, Recovered: 8500 * time.Millisecond}
	for at := time.Duration(0); at <= r.Duration; at += time.Second {
		r.Samples = append(r.Samples, soak.Sample{At: at, Figures: map[string]float64{
			figure: f(at), "acquired": 1000 * at.Seconds()}})
	}
	return r
}

func verdict(t *testing.T, r *soak.Run, check string) soak.Verdict {
	t.Helper()
	for _, v := range r.Checks() {
		if v.Check == check {
			return v
		}
	}
	t.Fatalf("Checks() has no %q", check)
	return soak.Verdict{}
}

// TestGrowthCatchesLeakedWatches attacks the growth check with the
// ZooKeeper leak of issue 24 (~20 k watches a minute) and with noise of
// the same size as a live workload's waiters: the leak must fail, the
// noise must pass.
func TestGrowthCatchesLeakedWatches(t *testing.T) {
	leak := synthetic("state watches", func(at time.Duration) float64 { return 300 + 333*at.Seconds() })
	if v := verdict(t, leak, "no steady growth"); v.Pass || !strings.Contains(v.Detail, "state watches grew") {
		t.Errorf("growth check of a watch leak = %+v, want a failure naming state watches", v)
	}
	noise := synthetic("state watches", func(time.Duration) float64 { return 100 + float64(rand.N(100)) })
	if v := verdict(t, noise, "no steady growth"); !v.Pass {
		t.Errorf("growth check of waiters' noise = %+v, want a pass", v)
	}
}

// TestPeakBoundCatchesWatchesBeyondWaiters attacks the per-sample bound
// with more watches than the waiters can hold.
func TestPeakBoundCatchesWatchesBeyondWaiters(t *testing.T) {
	r := synthetic("state watches", func(at time.Duration) float64 { return 40 * at.Seconds() })
	r.PeakBounds = map[string]float64{"state watches": 384}
	if v := verdict(t, r, "bounded at every sample"); v.Pass {
		t.Errorf("peak check of 600 watches with bound 384 = %+v, want a failure", v)
	}
}

// TestThroughputDecayFails attacks the throughput check with a store
// whose rate halves and more (etcd without compaction lost 56 %).
func TestThroughputDecayFails(t *testing.T) {
	r := synthetic("x", func(time.Duration) float64 { return 0 })
	for i := range r.Samples {
		s := r.Samples[i].At.Seconds()
		r.Samples[i].Figures["acquired"] = 1000*s - 35*s*s // 1,000/s falling to ~0
	}
	if v := verdict(t, r, "throughput kept"); v.Pass || !v.Info {
		t.Errorf("throughput check of a decaying rate in a short run = %+v, want a failure, reported (Info)", v)
	}
	r.Short = false
	if v := verdict(t, r, "throughput kept"); v.Pass || v.Info {
		t.Errorf("throughput check of a decaying rate in a long run = %+v, want a judged failure", v)
	}
	if s := r.Summary(); !slices.Contains(s.Failed, "throughput kept") {
		t.Errorf("Summary().Failed = %v, want the throughput check of a long run", s.Failed)
	}
}

// TestRefusedConnectionFails attacks the connection check with one
// PostgreSQL "too many clients" error.
func TestRefusedConnectionFails(t *testing.T) {
	r := synthetic("x", func(time.Duration) float64 { return 0 })
	r.Totals.Errors = map[string]int64{soak.Classify(errString("FATAL: sorry, too many clients already (SQLSTATE 53300)"), false): 1}
	if v := verdict(t, r, "no refused connection"); v.Pass {
		t.Errorf("connection check with a 53300 error = %+v, want a failure", v)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestTableRefusesOverlap attacks the exclusion table with every
// overlap a broken lock could produce across workers, and with a killed
// worker's holds.
func TestTableRefusesOverlap(t *testing.T) {
	tab, err := soak.OpenTable(filepath.Join(t.TempDir(), "table"))
	if err != nil {
		t.Fatalf("OpenTable = %v", err)
	}
	defer tab.Close()
	steps := []struct {
		w    int
		m    soak.Mode
		want bool
	}{
		{0, soak.Exclusive, true}, {1, soak.Exclusive, false}, {1, soak.Shared, false},
	}
	for _, s := range steps {
		if got := tab.Enter(1, s.w, s.m); got != s.want {
			t.Errorf("Enter(1, %d, %v) = %v, want %v", s.w, s.m, got, s.want)
		}
	}
	tab.Leave(1, 0, soak.Exclusive)
	for w := range 3 {
		if !tab.Enter(2, w, soak.Permit) {
			t.Errorf("Enter(2, %d, Permit) = false, want true (permit %d of 3)", w, w+1)
		}
	}
	if tab.Enter(2, 3, soak.Permit) {
		t.Errorf("Enter(2, 3, Permit) = true, want false (a 4th permit of 3)")
	}
	tab.Forget(1)
	if !tab.Enter(2, 3, soak.Permit) {
		t.Errorf("Enter(2, 3, Permit) after Forget(1) = false, want true")
	}
	if !tab.Enter(1, 2, soak.Shared) || !tab.Enter(1, 3, soak.Shared) || tab.Enter(1, 0, soak.Exclusive) {
		t.Errorf("shared holds of name 1 by workers 2 and 3 did not keep worker 0's exclusive hold out")
	}
}
