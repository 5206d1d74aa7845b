package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// lines keep a Locker's exclusive waiters of one name in one line, so
// that the name passes among them without a trip through the server's
// queue (see AcquireQueued):
//
//   - The line's first waiter is active: it waits in the server's queue
//     as every waiter did before lines (join, heartbeat, grant message,
//     takeover of a holder in doubt). The others are passive: they wait
//     in the Locker, with nothing on the server.
//   - When the active waiter gets the name from the server, the line's
//     passive waiters of that moment form a cohort, and the newest of
//     them becomes active instead (it joins the server's queue, keeping
//     the Locker's place behind the other Lockers' waiters).
//   - A holder of this Locker that releases the name while a waiter of
//     the cohort waits hands it to that waiter in the release script
//     itself (lua/release_local.lua): one script call, owner-checked,
//     with a new fencing token, and no pub/sub message.
//   - Once the cohort is served, the next release goes through the
//     server's queue as before: to the other Lockers' waiters in their
//     order, and to this Locker's active waiter in its turn.
//
// So a Locker's waiters of one name go in arrival order, each waiter
// once per turn of its Locker, and the Lockers take turns in the
// server's queue order; a name's handoff within a Locker costs one
// script call, where one through the queue costs two (the waiter's join
// and the holder's release) and a message. Shared holds, permits,
// leases with a lock-delay and Lockers with WaitReplicas (whose grants
// replicas must acknowledge) wait in the server's queue only.
type lines struct {
	mu     sync.Mutex
	byName map[string]*line
}

// A line is the waiters of one name in one Locker.
type line struct {
	seq       uint64 // the last waiter's number
	cohortEnd uint64 // passive waiters numbered up to this may be handed the name here
	active    *lineWaiter
	passive   []*lineWaiter // in arrival order; picked ones included
}

// A lineWaiter is one AcquireQueued call in a line.
type lineWaiter struct {
	lease driver.Lease
	seq   uint64
	ahead int // waiters ahead of it in the line when it joined, the holder included

	// Guarded by lines.mu.
	state waiterState
	fence uint64    // when handed the name
	at    time.Time // when handed the name: when the release that handed it the name was sent

	wake chan struct{} // one pending wake-up: its state changed
}

type waiterState int8

const (
	inLine   waiterState = iota // passive: it waits in the Locker
	picked                      // a release is handing it the name
	active                      // it waits in the server's queue
	handedOn                    // it holds the name
	unknown                     // the release that was handing it the name did not reply that it did
)

// lineable reports whether l waits in a line: an exclusive lease without
// a lock-delay, on a Locker without WaitReplicas.
func (d *redisDriver) lineable(l driver.Lease) bool {
	return d.wait == nil && !l.Shared && l.Limit == 0 && l.Delay == 0
}

// join puts l at the end of its name's line; the waiter is active if
// nobody else is.
func (ls *lines) join(l driver.Lease) *lineWaiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.byName == nil {
		ls.byName = make(map[string]*line)
	}
	ln := ls.byName[l.Name]
	if ln == nil {
		ln = &line{}
		ls.byName[l.Name] = ln
	}
	ln.seq++
	w := &lineWaiter{lease: l, seq: ln.seq, ahead: 1 + len(ln.passive), wake: make(chan struct{}, 1)}
	if ln.active != nil {
		w.ahead++
	}
	ln.passive = append(ln.passive, w)
	ls.fix(l.Name, ln)
	return w
}

// fix makes the newest passive waiter active if nobody is, and drops an
// empty line. Called with ls.mu held.
//
// The newest, not the oldest: the active waiter only keeps the Locker's
// place in the server's queue, and is served when the name comes back to
// the Locker; the older ones are served by the cohort before it. A line
// that made its oldest waiter active would serve the same two waiters
// every other turn of its Locker and the others at every turn (Jain's
// index 0.942 over 16 waiters in 2 Lockers, where each waiter of a
// cohort gets one turn).
func (ls *lines) fix(name string, ln *line) {
	if ln.active == nil {
		for i := len(ln.passive) - 1; i >= 0; i-- {
			if w := ln.passive[i]; w.state == inLine {
				ln.passive = slices.Delete(ln.passive, i, i+1)
				ln.active, w.state = w, active
				w.signal()
				break
			}
		}
	}
	if ln.active == nil && len(ln.passive) == 0 {
		delete(ls.byName, name)
	}
}

func (w *lineWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waitPassive waits until w is handed the name (then it returns
// handedOn, with the grant), is to wait in the server's queue (active), or
// to ask the server whether it holds the name (unknown), or ctx ends
// (then it returns inLine and the error).
func (ls *lines) waitPassive(ctx context.Context, w *lineWaiter) (driver.Result, waiterState, error) {
	for {
		ls.mu.Lock()
		switch w.state {
		case handedOn:
			ls.mu.Unlock()
			return driver.Result{Acquired: true, Fence: w.fence, LeaseStart: w.at, Waited: true, Ahead: w.ahead}, handedOn, nil
		case active, unknown:
			ls.mu.Unlock()
			return driver.Result{}, w.state, nil
		}
		done := ctx.Done()
		if w.state == picked {
			// A release is handing it the name: its outcome decides
			// whether there is a lock to return (the core releases one
			// that comes after ctx ended).
			done = nil
		} else if ctx.Err() != nil {
			ls.drop(w)
			ls.mu.Unlock()
			return driver.Result{}, inLine, fmt.Errorf("redislock: acquire %q: %w", w.lease.Name, ctx.Err())
		}
		ls.mu.Unlock()
		select {
		case <-w.wake:
		case <-done:
		}
	}
}

// drop takes w out of its line. Called with ls.mu held.
func (ls *lines) drop(w *lineWaiter) {
	ln := ls.byName[w.lease.Name]
	ln.passive = slices.DeleteFunc(ln.passive, func(x *lineWaiter) bool { return x == w })
	ls.fix(w.lease.Name, ln)
}

// settle ends w's unknown state: it holds the name and leaves the line
// (done), or waits on.
func (ls *lines) settle(w *lineWaiter, done bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if done {
		ls.drop(w)
		return
	}
	w.state = inLine
	ls.fix(w.lease.Name, ls.byName[w.lease.Name])
}

// activeDone ends w's turn as the active waiter: acquired, it starts a
// cohort of the passive waiters there are now. Either way the next one
// becomes active.
func (ls *lines) activeDone(w *lineWaiter, acquired bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ln := ls.byName[w.lease.Name]
	if ln == nil || ln.active != w {
		return
	}
	ln.active = nil
	if acquired {
		ln.cohortEnd = ln.seq
	}
	ls.fix(w.lease.Name, ln)
}

// pick returns the first waiter of name's cohort, marked as being handed
// the name, or nil.
func (ls *lines) pick(name string) *lineWaiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ln := ls.byName[name]
	if ln == nil {
		return nil
	}
	for _, w := range ln.passive {
		if w.seq > ln.cohortEnd {
			break
		}
		if w.state == inLine {
			w.state = picked
			return w
		}
	}
	return nil
}

// handed ends a pick with its outcome: handedOn (w holds the name with
// fence, its lease measured from at), inLine (it waits on) or unknown.
func (ls *lines) handed(w *lineWaiter, outcome waiterState, fence uint64, at time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	w.state = outcome
	if outcome == handedOn {
		w.fence, w.at = fence, at
		ls.drop(w)
	} else {
		ls.fix(w.lease.Name, ls.byName[w.lease.Name])
	}
	w.signal()
}

// passive returns how many of this Locker's waiters of name wait in its
// line without an entry in the server's queue.
func (ls *lines) passive(name string) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ln := ls.byName[name]; ln != nil {
		return len(ln.passive)
	}
	return 0
}
