package main

// The harness is a main package, which no external test package can
// import; these tests check its arithmetic from inside.

import (
	"math"
	"slices"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 100}, {100, 100}, {10, 10}, {0, 10}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("percentile(1..100 by 10, %v) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil, 50) = %d, want 0", got)
	}
}

func TestSpread(t *testing.T) {
	s := spreadOf([]float64{3, 1, math.NaN(), 2, 10})
	if s.med != 2.5 || s.lo != 1 || s.hi != 10 || s.n != 4 {
		t.Errorf("spreadOf(3 1 NaN 2 10) = %+v, want median 2.5, min 1, max 10 over 4", s)
	}
}

func TestComputeHot(t *testing.T) {
	// Owner 0 (this process) and owner 1 (the other) alternate, then
	// owner 1 takes it again; one caller is still waiting at the stop.
	const start, stop = 1000, 2000
	halves := []hotHalf{
		{Events: []hotEvent{{Owner: 0, Call: 1000, Acq: 1010, Rel: 1100}, {Owner: 0, Call: 1300, Acq: 1500, Rel: 1600}}, Trips: 4, Censored: []int64{700}},
		{Events: []hotEvent{{Owner: 1, Call: 1005, Acq: 1150, Rel: 1250}, {Owner: 1, Call: 1700, Acq: 1700, Rel: 1750}}, Trips: 5},
	}
	cmds := cmdStats{"evalsha": 8, "subscribe": 1}
	f := computeHot(halves, 2, start, stop, cmds)
	if f.n != 4 || f.total != 4 {
		t.Errorf("acquisitions = %d in window, %d in all, want 4 and 4", f.n, f.total)
	}
	if want := []int64{0, 10, 145, 200}; !slices.Equal(f.waits, want) {
		t.Errorf("waits = %v, want %v", f.waits, want)
	}
	if f.waitMax != 700 {
		t.Errorf("waitMax = %d, want 700 (the caller still waiting)", f.waitMax)
	}
	// Handoffs between different owners: 1100->1150, 1250->1500, 1600->1700.
	if want := []int64{50, 100, 250}; !slices.Equal(f.handoffs, want) {
		t.Errorf("handoffs = %v, want %v", f.handoffs, want)
	}
	if f.selfReacquire != 0 {
		t.Errorf("selfReacquire = %v, want 0", f.selfReacquire)
	}
	if f.jain != 1 {
		t.Errorf("jain = %v, want 1 (2 acquisitions each)", f.jain)
	}
	if f.rtPerAcq != 10.0/4 || f.cmdsPerAcq != 9.0/4 {
		t.Errorf("round trips, commands per acquisition = %v, %v, want 2.5, 2.25", f.rtPerAcq, f.cmdsPerAcq)
	}
	if f.overlaps != 0 {
		t.Errorf("overlaps = %d, want 0", f.overlaps)
	}
	halves[1].Events[0].Acq = 1090 // owner 1 "acquires" before owner 0 released
	if f := computeHot(halves, 2, start, stop, cmds); f.overlaps != 1 {
		t.Errorf("overlaps = %d, want 1", f.overlaps)
	}
}
