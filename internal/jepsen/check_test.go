package jepsen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

func writeJSONL[T any](t *testing.T, path string, lines []T) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, l := range lines {
		enc.Encode(l)
	}
}

// Each checker must catch the violation it exists for; these histories
// are made up to contain exactly one.
func TestCheckersCatchViolations(t *testing.T) {
	// Worker 0 holds [10, 100] with fence 1, reads 0 and writes 1;
	// worker 1 holds [50, 150] with fence 2.
	w0 := []event{
		{Ev: "held", Worker: 0, Acq: 1, Fence: 1, T: 10},
		{Ev: "call", Worker: 0, Acq: 1, ID: 1, Kind: "read", Fence: 1, T: 20},
		{Ev: "ret", Worker: 0, Acq: 1, ID: 1, Kind: "read", Fence: 1, Value: 0, Accepted: true, T: 30},
		{Ev: "call", Worker: 0, Acq: 1, ID: 2, Kind: "write", Fence: 1, Value: 1, T: 60},
		{Ev: "ret", Worker: 0, Acq: 1, ID: 2, Kind: "write", Fence: 1, Value: 1, Accepted: true, T: 70},
		{Ev: "end", Worker: 0, Acq: 1, Why: "released", T: 100},
	}
	w1 := []event{
		{Ev: "held", Worker: 1, Acq: 1, Fence: 2, T: 50},
		{Ev: "call", Worker: 1, Acq: 1, ID: 1, Kind: "read", Fence: 2, T: 110},
		{Ev: "ret", Worker: 1, Acq: 1, ID: 1, Kind: "read", Fence: 2, Value: 1, Accepted: true, T: 120},
		{Ev: "end", Worker: 1, Acq: 1, Why: "released", T: 150},
	}
	reg := []regOp{
		{Seq: 0, Kind: "read", Worker: 0, Fence: 1, Value: 0, Accepted: true, T: 25},
		{Seq: 1, Kind: "write", Worker: 0, Fence: 1, Value: 1, Accepted: true, T: 65},
		{Seq: 2, Kind: "read", Worker: 1, Fence: 2, Value: 1, Accepted: true, T: 115},
	}
	run := func(t *testing.T, w0, w1 []event, reg []regOp, pauses []pause) *outcome {
		dir := t.TempDir()
		p0, p1, pr := filepath.Join(dir, "0"), filepath.Join(dir, "1"), filepath.Join(dir, "r")
		writeJSONL(t, p0, w0)
		writeJSONL(t, p1, w1)
		writeJSONL(t, pr, reg)
		o, err := check([]string{p0, p1}, pr, nil, pauses, 200, false, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	wantViolation := func(t *testing.T, o *outcome, substr string) {
		t.Helper()
		for _, v := range o.violations {
			if strings.Contains(v, substr) {
				return
			}
		}
		t.Errorf("violations = %q, want one containing %q", o.violations, substr)
	}

	t.Run("overlap with an accepted write", func(t *testing.T) {
		wantViolation(t, run(t, w0, w1, reg, nil), "both held the lock")
	})
	t.Run("a paused worker's write during the overlap still counts", func(t *testing.T) {
		wantViolation(t, run(t, w0, w1, reg, []pause{{worker: 0, stop: 40, cont: 95}}), "both held the lock")
	})
	t.Run("overlap of a paused worker that did nothing is allowed", func(t *testing.T) {
		early := append([]regOp{}, reg...)
		early[1].T = 33 // the register took the write before worker 1 acquired
		o := run(t, w0, w1, early, []pause{{worker: 0, stop: 40, cont: 95}})
		if o.overlaps != 1 || len(o.violations) != 0 || o.maxStale != 5 {
			t.Errorf("overlaps = %d, violations = %q, max stale %v; want 1 fenced overlap, none, 5ns", o.overlaps, o.violations, o.maxStale)
		}
	})
	t.Run("lost update and non-increasing fence", func(t *testing.T) {
		bad := append(append([]regOp{}, reg...),
			regOp{Seq: 3, Kind: "write", Worker: 1, Fence: 1, Value: 1, Accepted: true})
		o := run(t, w0[:1], w1[:1], bad, nil)
		wantViolation(t, o, "an update was lost")
		wantViolation(t, o, "not above the previous")
	})
	t.Run("not linearizable", func(t *testing.T) {
		w1bad := append([]event{}, w1...)
		w1bad[2].Value = 7 // read a value nobody wrote
		o := run(t, w0, w1bad, reg, nil)
		if o.linearizable != porcupine.Illegal {
			t.Errorf("linearizable = %v, want Illegal", o.linearizable)
		}
	})
	t.Run("a reply heard only after a pause does not count as acting late", func(t *testing.T) {
		// Worker 0 was stopped between sending its write (served at 33,
		// before worker 1 acquired) and hearing the reply (at 96).
		late := append([]event{}, w0...)
		late[3].T, late[4].T = 32, 96
		early := append([]regOp{}, reg...)
		early[1].T = 33
		o := run(t, late, w1, early, []pause{{worker: 0, stop: 34, cont: 95}})
		if len(o.violations) != 0 {
			t.Errorf("violations = %q, want none", o.violations)
		}
	})
	t.Run("clean history", func(t *testing.T) {
		w0ok := append([]event{}, w0...)
		w0ok[5].T = 45 // released before worker 1 acquired
		if o := run(t, w0ok, w1, reg, nil); len(o.violations) != 0 || o.linearizable != porcupine.Ok {
			t.Errorf("violations = %q, linearizable = %v; want none, Ok", o.violations, o.linearizable)
		}
	})
}

func TestPermitChecker(t *testing.T) {
	held := func(w int, fence uint64, from, to int64) []event {
		return []event{{Ev: "held", Worker: w, Acq: 1, Fence: fence, T: from}, {Ev: "end", Worker: w, Acq: 1, Why: "released", T: to}}
	}
	run := func(t *testing.T, pauses []pause, histories ...[]event) *outcome {
		return checkHistories(t, pauses, 200, false, 2, histories...)
	}
	t.Run("two permits of two at once", func(t *testing.T) {
		if o := run(t, nil, held(0, 1, 10, 100), held(1, 2, 20, 90), held(2, 3, 100, 150)); len(o.violations) != 0 {
			t.Errorf("violations = %q, want none", o.violations)
		}
	})
	t.Run("three permits of two at once", func(t *testing.T) {
		o := run(t, nil, held(0, 1, 10, 100), held(1, 2, 20, 90), held(2, 3, 50, 150))
		if len(o.violations) != 1 || !strings.Contains(o.violations[0], "3 holders of a semaphore of 2") {
			t.Errorf("violations = %q, want one for 3 holders", o.violations)
		}
	})
	t.Run("a paused holder is excused", func(t *testing.T) {
		o := run(t, []pause{{worker: 0, stop: 30, cont: 120}}, held(0, 1, 10, 130), held(1, 2, 20, 90), held(2, 3, 50, 150))
		if len(o.violations) != 0 || o.overlaps != 1 {
			t.Errorf("violations = %q, overlaps %d; want none, 1", o.violations, o.overlaps)
		}
	})
	t.Run("one fence for two permits", func(t *testing.T) {
		o := run(t, nil, held(0, 7, 10, 20), held(1, 7, 30, 40))
		if len(o.violations) != 1 || !strings.Contains(o.violations[0], "both given fence 7") {
			t.Errorf("violations = %q, want one for fence 7", o.violations)
		}
	})
}

func TestLastHeldCall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w")
	writeJSONL(t, path, []event{
		{Ev: "acquire", Acq: 1, T: 5}, {Ev: "held", Acq: 1, T: 8}, {Ev: "end", Acq: 1, T: 9},
		{Ev: "acquire", Acq: 2, T: 20}, {Ev: "held", Acq: 2, T: 25},
	})
	if called, holding := lastHeldCall(t, path); called != 20 || !holding {
		t.Errorf("lastHeldCall of a worker killed holding = %d, %v; want 20, true", called, holding)
	}
	writeJSONL(t, path, []event{{Ev: "acquire", Acq: 1, T: 5}, {Ev: "held", Acq: 1, T: 8}, {Ev: "end", Acq: 1, T: 9}})
	if _, holding := lastHeldCall(t, path); holding {
		t.Errorf("lastHeldCall of a worker that released = holding, want not")
	}
}

// The token order checker: an acquisition granted (Acquire returned) after
// another ended (Release returned, or the loss was seen) has a higher
// fence, unless the run is a documented exception.
func TestTokenOrderChecker(t *testing.T) {
	// acq is one acquisition: Acquire called at called, returned at
	// called+1 with fence, belief ended at rel, Release returned at rel+10.
	acq := func(w, n int, fence uint64, called, rel int64) []event {
		return []event{
			{Ev: "acquire", Worker: w, Acq: n, T: called},
			{Ev: "held", Worker: w, Acq: n, Fence: fence, T: called + 1},
			{Ev: "end", Worker: w, Acq: n, Why: "released", T: rel},
			{Ev: "release", Worker: w, Acq: n, T: rel + 10},
		}
	}
	run := func(t *testing.T, mayInvert bool, histories ...[]event) *outcome {
		t.Helper()
		return checkHistories(t, nil, 1000, mayInvert, 0, histories...)
	}
	t.Run("increasing fences pass", func(t *testing.T) {
		o := run(t, false, append(acq(0, 1, 1, 10, 20), acq(0, 2, 5, 60, 70)...), acq(1, 1, 3, 30, 40))
		if len(o.violations) != 0 || o.inversions != 0 {
			t.Errorf("violations = %q, inversions %d; want none, 0", o.violations, o.inversions)
		}
	})
	t.Run("a lower fence after a release fails", func(t *testing.T) {
		// Worker 1 called Acquire at 50, after worker 0's fence 7 had
		// been released (40), and got fence 3.
		o := run(t, false, acq(0, 1, 7, 10, 30), acq(1, 1, 3, 50, 60))
		if o.inversions != 1 || len(o.violations) != 1 || !strings.Contains(o.violations[0], "token inversion: worker 1 acquired with fence 3") {
			t.Errorf("violations = %q, inversions %d; want one token inversion", o.violations, o.inversions)
		}
	})
	t.Run("a late grant's lower fence fails", func(t *testing.T) {
		// Worker 1 called Acquire at 5, before worker 0's, but it
		// returned fence 3 at 50, after fence 7 had been released (40).
		w1 := acq(1, 1, 3, 5, 60)
		w1[1].T = 50
		if o := run(t, false, acq(0, 1, 7, 10, 30), w1); o.inversions != 1 {
			t.Errorf("inversions = %d (violations %q), want 1", o.inversions, o.violations)
		}
	})
	t.Run("a repeated fence fails", func(t *testing.T) {
		o := run(t, false, acq(0, 1, 7, 10, 30), acq(1, 1, 7, 50, 60))
		if o.inversions != 1 {
			t.Errorf("inversions = %d (violations %q), want 1", o.inversions, o.violations)
		}
	})
	t.Run("a lower fence after a loss fails", func(t *testing.T) {
		lost := []event{
			{Ev: "acquire", Worker: 0, Acq: 1, T: 10},
			{Ev: "held", Worker: 0, Acq: 1, Fence: 9, T: 11},
			{Ev: "end", Worker: 0, Acq: 1, Why: "lock lost", T: 30},
		}
		if o := run(t, false, lost, acq(1, 1, 4, 40, 50)); o.inversions != 1 {
			t.Errorf("inversions = %d (violations %q), want 1", o.inversions, o.violations)
		}
	})
	t.Run("acquisitions concurrent in real time may come in any order", func(t *testing.T) {
		// Worker 1's Acquire returned at 35, after worker 0's belief
		// ended (30) but before its Release returned (40): their order
		// is not known.
		w1 := acq(1, 1, 3, 25, 60)
		w1[1].T = 35
		if o := run(t, false, acq(0, 1, 7, 10, 30), w1); o.inversions != 0 || len(o.violations) != 0 {
			t.Errorf("violations = %q, inversions %d; want none", o.violations, o.inversions)
		}
	})
	t.Run("the documented exception is counted apart", func(t *testing.T) {
		o := run(t, true, acq(0, 1, 7, 10, 30), acq(1, 1, 3, 50, 60))
		if o.inversions != 0 || o.expectedInversions != 1 || len(o.violations) != 0 {
			t.Errorf("violations = %q, inversions %d, expected %d; want none, 0, 1", o.violations, o.inversions, o.expectedInversions)
		}
	})
}

// The quiet-phase progress checker wants every live worker to acquire
// after the fault, not only some.
func TestProgressChecker(t *testing.T) {
	dir := t.TempDir()
	held := func(n int, at int64) string {
		p := filepath.Join(dir, strconv.Itoa(n))
		writeJSONL(t, p, []event{{Ev: "held", Worker: n, Acq: 1, T: at}})
		return p
	}
	paths := []string{held(0, 150), held(1, 50), held(2, 60)}
	got, err := unprogressed(paths, map[int]int64{2: 70}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 1 {
		t.Errorf("unprogressed(healed 100) = %v, want [1] (worker 2 is dead)", got)
	}
	if got, _ := unprogressed(paths[:1], nil, 100); len(got) != 0 {
		t.Errorf("unprogressed(one worker that acquired) = %v, want none", got)
	}
}

// checkHistories writes one history file per worker and an empty register
// history, and runs the checkers on them with the given pauses, end of run,
// whether token inversions are the documented exception, and permits.
func checkHistories(t *testing.T, pauses []pause, runEnd int64, mayInvert bool, permits int, histories ...[]event) *outcome {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, h := range histories {
		p := filepath.Join(dir, strconv.Itoa(i))
		writeJSONL(t, p, h)
		paths = append(paths, p)
	}
	pr := filepath.Join(dir, "r")
	writeJSONL(t, pr, []regOp{})
	o, err := check(paths, pr, nil, pauses, runEnd, false, mayInvert, permits)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
