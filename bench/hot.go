package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/fairness"
)

// hotJob is one process's half of a hot-name run: goroutines owners
// FirstOwner.. contend for Name from StartNs until StopNs (Unix ns, wall
// clock: both processes run on one host, so their clocks agree).
type hotJob struct {
	Kind       string // "" for a hot-name run, kindWait for runWait
	Lib        string
	Addr       string
	Name       string
	Goroutines int
	FirstOwner int
	StartNs    int64
	StopNs     int64
	Hold       time.Duration
	TTL        time.Duration
	// WindowNs, when set, starts the steady window: hotHalf.WindowCPU is
	// this process's CPU from then until StopNs, away from the queue's
	// filling at the start and its cancellations at the stop.
	WindowNs int64
	// Names, when above 1, has owner o contend for Name + "/" + o%Names
	// instead of Name: contenders spread over that many names.
	Names int
}

// hotEvent is one acquisition: when the owner called lock, when it
// returned, and when the owner called unlock (all Unix ns).
type hotEvent struct {
	Owner          int
	Call, Acq, Rel int64
}

// hotHalf is what one process reports for a job.
type hotHalf struct {
	Events   []hotEvent
	Censored []int64       // waits of callers still waiting at the stop, in ns
	Trips    int64         // requests sent (go-redis hook)
	TripsBy  cmdStats      // the same by command
	CPU      time.Duration // this process's CPU time during the job
	GiveUps  int64
	Errors   []string
	// WindowCPU is this process's CPU time in the steady window.
	WindowCPU time.Duration
}

// runHot runs one process's half of a job and reports it.
func runHot(job hotJob) hotHalf {
	var out hotHalf
	trips0, by0, giveUps0, cpu0 := trips.n.Load(), trips.snapshot(), giveUps.Load(), selfCPU()
	lk, err := openJob(job)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
		return out
	}
	start, stop := time.Unix(0, job.StartNs), time.Unix(0, job.StopNs)
	var window sync.WaitGroup
	if job.WindowNs != 0 {
		window.Go(func() {
			time.Sleep(time.Until(time.Unix(0, job.WindowNs)))
			c0 := selfCPU()
			time.Sleep(time.Until(stop))
			out.WindowCPU = selfCPU() - c0
		})
	}
	time.Sleep(time.Until(start))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for g := range job.Goroutines {
		owner := job.FirstOwner + g
		name := job.Name
		if job.Names > 1 {
			name = fmt.Sprintf("%s/%d", job.Name, owner%job.Names)
		}
		wg.Go(func() {
			var evs []hotEvent
			var censored []int64
			var errs []string
			for {
				call := time.Now()
				if !call.Before(stop) {
					break
				}
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				unlock, err := lk.lock(ctx, name)
				cancel()
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) || time.Now().After(stop) {
						censored = append(censored, stop.Sub(call).Nanoseconds())
					} else {
						errs = append(errs, fmt.Sprintf("owner %d: lock: %v", owner, err))
					}
					break
				}
				acq := time.Now()
				for time.Since(acq) < job.Hold { // the critical section
				}
				rel := time.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := unlock(rctx); err != nil {
					errs = append(errs, fmt.Sprintf("owner %d: unlock: %v", owner, err))
				}
				rcancel()
				evs = append(evs, hotEvent{Owner: owner, Call: call.UnixNano(), Acq: acq.UnixNano(), Rel: rel.UnixNano()})
			}
			mu.Lock()
			out.Events = append(out.Events, evs...)
			out.Censored = append(out.Censored, censored...)
			out.Errors = append(out.Errors, errs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	window.Wait()
	if err := lk.close(); err != nil {
		out.Errors = append(out.Errors, "close: "+err.Error())
	}
	out.Trips = trips.n.Load() - trips0
	out.TripsBy = trips.snapshot().sub(by0, false)
	out.CPU = selfCPU() - cpu0
	out.GiveUps = giveUps.Load() - giveUps0
	return out
}

// hotFigures are the figures of one hot-name run.
type hotFigures struct {
	n                    int     // acquisitions within the window
	total                int     // all acquisitions, also those after the stop
	rate                 float64 // acquisitions/s
	waits                []int64 // completed waits, sorted
	censored             []int64
	waitMax              int64 // including callers still waiting at the stop
	handoffs             []int64
	selfReacquire        float64 // share of successive acquisitions by the same owner
	jain                 float64
	cmdsPerAcq, rtPerAcq float64
	clientCPU, serverCPU float64 // per acquisition, ns; client: both processes
	giveUps              int64
	overlaps             int // successive acquisitions that overlapped: must be 0
}

func computeHot(halves []hotHalf, owners int, start, stop int64, cmds cmdStats) hotFigures {
	var f hotFigures
	var evs []hotEvent
	var tripsSum int64
	for _, h := range halves {
		evs = append(evs, h.Events...)
		f.censored = append(f.censored, h.Censored...)
		tripsSum += h.Trips
		f.clientCPU += float64(h.CPU)
		f.giveUps += h.GiveUps
	}
	slices.SortFunc(evs, func(a, b hotEvent) int { return cmp.Compare(a.Acq, b.Acq) })
	counts := make([]int, owners)
	var same, pairs int
	for i, e := range evs {
		if i > 0 {
			p := evs[i-1]
			pairs++
			if e.Acq < p.Rel {
				f.overlaps++
			}
			if e.Owner == p.Owner {
				same++
			} else {
				f.handoffs = append(f.handoffs, e.Acq-p.Rel)
			}
		}
		if e.Acq < start || e.Acq >= stop {
			continue
		}
		f.n++
		if e.Owner >= 0 && e.Owner < owners {
			counts[e.Owner]++
		}
		f.waits = append(f.waits, e.Acq-e.Call)
	}
	slices.Sort(f.waits)
	slices.Sort(f.handoffs)
	f.rate = float64(f.n) / (float64(stop-start) / 1e9)
	for _, w := range f.waits {
		f.waitMax = max(f.waitMax, w)
	}
	for _, w := range f.censored {
		f.waitMax = max(f.waitMax, w)
	}
	if pairs > 0 {
		f.selfReacquire = float64(same) / float64(pairs)
	}
	f.jain = fairness.Jain(counts)
	f.total = len(evs)
	if len(evs) == 0 {
		f.clientCPU = 0
	} else {
		f.clientCPU /= float64(len(evs))
		f.cmdsPerAcq = float64(cmds.total()) / float64(len(evs))
		f.rtPerAcq = float64(tripsSum+cmds.pubsubCalls()) / float64(len(evs))
	}
	return f
}

// openJob opens the job's library on its store.
func openJob(job hotJob) (locker, error) {
	l, ok := allLibs()[job.Lib]
	if !ok {
		return nil, errors.New("unknown library " + job.Lib)
	}
	return l.open(job.Addr, job.TTL)
}
