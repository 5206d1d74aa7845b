package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// interval is one acquisition as its worker believed it: from Acquire
// returning to Release being called or Done closing (or the worker's
// death).
type interval struct {
	worker, acq int
	fence       uint64
	start, end  int64
	accepted    []int64 // when the register served the operations it accepted from it
}

// outcome is what the checkers found.
type outcome struct {
	acquisitions int
	accepted     int // register writes accepted
	rejected     int // register operations refused (stale fence)
	ops          int // register operations in the linearizability check
	linearizable porcupine.CheckResult
	info         porcupine.LinearizationInfo
	violations   []string
	maxStale     time.Duration // the longest stale belief after its worker resumed
	overlaps     int           // overlapping beliefs allowed as stale (fenced off)
	// inversions counts acquisitions whose fence was not above that of an
	// acquisition that had ended before their Acquire was called;
	// expectedInversions counts them instead when the run's nemesis is a
	// documented exception (tokensMayInvert).
	inversions, expectedInversions int
}

func (o *outcome) violate(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			continue // a line cut short by kill -9
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// regInput and regOutput are the register model's operations.
type regInput struct {
	kind  string
	fence uint64
	value int64
}

type regOutput struct {
	known    bool // false: the worker never heard back
	accepted bool
	value    int64
}

type regState struct {
	value int64
	fence uint64
}

// registerModel is the fenced register, sequentially: an operation below
// the highest accepted fence is refused; one at or above it is accepted,
// raises the fence and reads or writes the value. An operation whose
// reply was never heard may or may not have happened.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		if in.fence < s.fence {
			if out.known && out.accepted {
				return nil
			}
			return []any{s}
		}
		next := regState{value: s.value, fence: in.fence}
		if in.kind == "write" {
			next.value = in.value
		}
		if !out.known {
			return []any{s, next}
		}
		if !out.accepted || out.value != next.value {
			return nil
		}
		return []any{next}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch {
		case !out.known:
			return fmt.Sprintf("%s(fence %d, %d) -> ?", in.kind, in.fence, in.value)
		case !out.accepted:
			return fmt.Sprintf("%s(fence %d, %d) -> refused", in.kind, in.fence, in.value)
		}
		return fmt.Sprintf("%s(fence %d, %d) -> %d", in.kind, in.fence, in.value, out.value)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		return fmt.Sprintf("value %d, fence %d", s.value, s.fence)
	},
}

// check reads the histories of a run and applies every checker.
// deaths maps a worker to when it was killed; pauses lists when workers
// were stopped; lossy allows overlapping beliefs (the store forgot its
// locks), which fencing must then have made harmless.
//
// With limit above 0 the workers held permits of a semaphore of limit and
// made no register operations: the overlap checker then allows up to limit
// holders at once, and every permit's fence must be its own.
//
// tokensMayInvert makes token inversions (see checkTokenOrder) expected:
// counted apart, not violations (Redis without persistence restarted
// after its clock stepped back).
func check(historyPaths []string, registerLog string, deaths map[int]int64, pauses []pause, runEnd int64, lossy, tokensMayInvert bool, limit int) (*outcome, error) {
	o := &outcome{}
	var ops []porcupine.Operation
	var ivs []*interval
	var acqs []acquisition
	for _, path := range historyPaths {
		evs, err := readLines[event](path)
		if err != nil {
			return nil, err
		}
		calls := map[int]event{}
		rets := map[int]event{}
		byAcq := map[int]*interval{}
		acqs = append(acqs, acquisitions(evs)...)
		for _, e := range evs {
			switch e.Ev {
			case "held":
				iv := &interval{worker: e.Worker, acq: e.Acq, fence: e.Fence, start: e.T, end: -1}
				byAcq[e.Acq] = iv
				ivs = append(ivs, iv)
				o.acquisitions++
			case "end":
				if iv := byAcq[e.Acq]; iv != nil && iv.end < 0 {
					iv.end = e.T
				}
			case "call":
				calls[e.ID] = e
			case "ret":
				rets[e.ID] = e
			}
		}
		for _, iv := range byAcq {
			if iv.end < 0 {
				iv.end = runEnd
				if d, ok := deaths[iv.worker]; ok && d < iv.end {
					iv.end = d
				}
			}
		}
		for id, c := range calls {
			op := porcupine.Operation{ClientId: c.Worker, Call: c.T, Return: math.MaxInt64,
				Input: regInput{kind: c.Kind, fence: c.Fence, value: c.Value}, Output: regOutput{}}
			if r, ok := rets[id]; ok {
				op.Return = r.T
				op.Output = regOutput{known: true, accepted: r.Accepted, value: r.Value}

			}
			ops = append(ops, op)
		}
	}
	o.ops = len(ops)
	o.linearizable, o.info = porcupine.CheckOperationsVerbose(registerModel.ToModel(), ops, time.Minute)
	if o.linearizable == porcupine.Illegal {
		o.violate("the register history is not linearizable")
	}

	// The register's own log: accepted writes in the order it served them.
	log, err := readLines[regOp](registerLog)
	if err != nil {
		return nil, err
	}
	// When each acquisition's operations took effect: the register's own
	// clock reading as it served them (an operation's reply can come much
	// later, to a worker paused meanwhile).
	byFence := map[[2]uint64]*interval{}
	for _, iv := range ivs {
		byFence[[2]uint64{uint64(iv.worker), iv.fence}] = iv
	}
	for _, op := range log {
		if iv := byFence[[2]uint64{uint64(op.Worker), op.Fence}]; iv != nil && op.Accepted {
			iv.accepted = append(iv.accepted, op.T)
		}
	}
	var last regOp
	for _, op := range log {
		if !op.Accepted {
			o.rejected++
			continue
		}
		if op.Kind != "write" {
			continue
		}
		o.accepted++
		if op.Fence <= last.Fence && last.Kind != "" {
			o.violate("accepted write %d by worker %d carries fence %d, not above the previous accepted write's %d", op.Seq, op.Worker, op.Fence, last.Fence)
		}
		if op.Value != last.Value+1 {
			o.violate("accepted write %d by worker %d wrote %d after %d: an update was lost", op.Seq, op.Worker, op.Value, last.Value)
		}
		last = op
	}

	if limit == 0 {
		checkTokenOrder(o, acqs, tokensMayInvert)
	}

	// Believed-held intervals.
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
	if limit > 0 {
		checkPermits(o, ivs, limit, pauses, lossy)
		return o, nil
	}
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if b.start >= a.end {
				break
			}
			if a.worker == b.worker {
				continue
			}
			from, to := max(a.start, b.start), min(a.end, b.end)
			if from >= to {
				continue
			}
			stale := a
			if b.fence < a.fence {
				stale = b
			}
			actedDuringOverlap := false
			for _, at := range stale.accepted {
				if at > from && at < to {
					actedDuringOverlap = true
				}
			}
			resumed, paused := pausedDuring(pauses, stale.worker, stale.start, to)
			switch {
			case actedDuringOverlap && !lossy:
				o.violate("workers %d (fence %d) and %d (fence %d) both held the lock for %v, and the older one's register operation was accepted meanwhile",
					a.worker, a.fence, b.worker, b.fence, time.Duration(to-from))
			case paused || lossy:
				o.overlaps++
				if paused {
					o.maxStale = max(o.maxStale, time.Duration(stale.end-resumed))
				}
			default:
				o.violate("workers %d (fence %d) and %d (fence %d) both believed they held the lock for %v with no process paused",
					a.worker, a.fence, b.worker, b.fence, time.Duration(to-from))
			}
		}
	}
	return o, nil
}

// pause is a worker stopped with SIGSTOP from stop to cont.
type pause struct {
	worker     int
	stop, cont int64
}

// pausedDuring reports whether worker was paused at some time in
// [from, to], and when it resumed.
func pausedDuring(pauses []pause, worker int, from, to int64) (resumed int64, ok bool) {
	for _, p := range pauses {
		if p.worker == worker && p.stop < to && p.cont > from {
			return p.cont, true
		}
	}
	return 0, false
}

// checkPermits checks the believed-held intervals of a semaphore's
// permits: at no time more than limit of them, unless a process in the
// excess was paused (it could not know) or the store forgot its holders;
// and no two permits with one fence.
func checkPermits(o *outcome, ivs []*interval, limit int, pauses []pause, lossy bool) {
	byFence := map[uint64]*interval{}
	for _, iv := range ivs {
		if other := byFence[iv.fence]; other != nil {
			o.violate("workers %d and %d were both given fence %d", other.worker, iv.worker, iv.fence)
		}
		byFence[iv.fence] = iv
	}
	var active []*interval // sorted by start: ivs is
	for _, iv := range ivs {
		active = slices.DeleteFunc(active, func(a *interval) bool { return a.end <= iv.start })
		active = append(active, iv)
		if len(active) <= limit {
			continue
		}
		excused := lossy
		for _, a := range active {
			if _, paused := pausedDuring(pauses, a.worker, a.start, iv.start); paused {
				excused = true
			}
		}
		if excused {
			o.overlaps++
			continue
		}
		var who []string
		for _, a := range active {
			who = append(who, fmt.Sprintf("worker %d (fence %d)", a.worker, a.fence))
		}
		o.violate("%d holders of a semaphore of %d at once with no process paused: %s", len(active), limit, strings.Join(who, ", "))
	}
}

// acquisition is one successful Acquire as its worker saw it: when it was
// called and when it returned, the fence it returned, and when it ended
// (Release returned, or the loss was observed; 0 if neither: the worker
// was killed holding it, or the run ended).
type acquisition struct {
	worker, acq         int
	fence               uint64
	called, held, ended int64
}

// acquisitions reads one worker's history.
func acquisitions(evs []event) []acquisition {
	called := map[int]int64{}
	byAcq := map[int]*acquisition{}
	var order []int
	for _, e := range evs {
		switch e.Ev {
		case "acquire":
			called[e.Acq] = e.T
		case "held":
			byAcq[e.Acq] = &acquisition{worker: e.Worker, acq: e.Acq, fence: e.Fence, called: called[e.Acq], held: e.T}
			order = append(order, e.Acq)
		case "end":
			// A loss ends the acquisition when observed; a release only
			// once Release has returned ("release", below).
			if a := byAcq[e.Acq]; a != nil && e.Why != "released" && a.ended == 0 {
				a.ended = e.T
			}
		case "release":
			if a := byAcq[e.Acq]; a != nil && a.ended == 0 {
				a.ended = e.T
			}
		}
	}
	out := make([]acquisition, 0, len(order))
	for _, n := range order {
		out = append(out, *byAcq[n])
	}
	return out
}

// checkTokenOrder wants every acquisition that was granted (Acquire
// returned) after another acquisition had ended (its Release returned, or
// its loss was observed) to have a strictly higher fence: whatever
// happened to the store, a token never goes down or repeats across
// acquisitions ordered in real time. This covers every acquisition whose
// Acquire was called after the other ended, and also a waiter whose
// Acquire began earlier but returned a grant older than a later holder's
// (a late grant message): on an exclusive lock a grant older than the
// other's is either still valid when the other was granted (an overlap) or
// lapsed, and then must not be returned. Each acquisition whose fence is
// not above the highest fence ended before it was granted is one token
// inversion: a violation, or expected when mayInvert (a documented
// exception), counted apart.
func checkTokenOrder(o *outcome, acqs []acquisition, mayInvert bool) {
	ended := make([]acquisition, 0, len(acqs))
	for _, a := range acqs {
		if a.ended > 0 {
			ended = append(ended, a)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].ended < ended[j].ended })
	granted := slices.Clone(acqs)
	sort.Slice(granted, func(i, j int) bool { return granted[i].held < granted[j].held })
	// Sweep both in time order, keeping the highest fence ended so far.
	var top acquisition
	i, reported := 0, 0
	for _, b := range granted {
		for ; i < len(ended) && ended[i].ended < b.held; i++ {
			if ended[i].fence > top.fence || top.ended == 0 {
				top = ended[i]
			}
		}
		if top.ended == 0 || b.fence > top.fence {
			continue
		}
		if mayInvert {
			o.expectedInversions++
			continue
		}
		o.inversions++
		if reported < 5 {
			reported++
			o.violate("token inversion: worker %d acquired with fence %d (Acquire called at %d, returned at %d) after worker %d's acquisition with fence %d had ended (at %d)",
				b.worker, b.fence, b.called, b.held, top.worker, top.fence, top.ended)
		}
	}
	if o.inversions > reported {
		o.violate("%d more token inversions", o.inversions-reported)
	}
}

// unprogressed returns the live workers (not in deaths) whose history has
// no acquisition after healed: the quiet-phase progress checker wants
// every live worker, not only some, to acquire once the fault has ended.
func unprogressed(paths []string, deaths map[int]int64, healed int64) ([]int, error) {
	var out []int
	for n, p := range paths {
		if _, dead := deaths[n]; dead {
			continue
		}
		evs, err := readLines[event](p)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(evs, func(e event) bool { return e.Ev == "held" && e.T > healed }) {
			out = append(out, n)
		}
	}
	return out, nil
}
