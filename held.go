package dlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

type state int8

const (
	active   state = iota // held, renewed if asked
	released              // freed by the last Release
	lost                  // ownership no longer guaranteed
	closed                // released by Locker.Close
)

// held is one server-side acquisition, shared by its re-entered handles.
type held struct {
	l      *Locker
	lease  driver.Lease // Fence is the acquisition's token; Takeover is empty
	owner  *owner
	start  time.Time    // when the lease began (local, monotonic)
	parent ownerContext // every handle's context derives from it

	renew bool // renewed by the keeper (set once)

	// Guarded by l.mu.
	state      state
	cause      error     // why it was lost, once state is lost
	renewErr   error     // the last renewal's error, nil after one succeeds
	handles    []*Lock   // open handles, each at its index
	deadline   time.Time // monotonic: Done closes here unless renewed
	nextRenew  time.Time
	warnAt     time.Time // monotonic: at risk here unless renewed (see Warnings)
	watched    bool      // a handle asked for Warnings: h is in l.books.warnings
	extending  bool      // an Extend is under way (see Lock.Extend)
	refreshing int       // Refresh calls under way
	riskErr    error     // why h is at risk; nil when it is not
	index      [3]int    // positions in l.books.deadlines, .renewals and .warnings, -1 when absent

	// Kept with the acquisition so that taking a lock allocates them
	// together: its first handle (and handles' backing array while there
	// is one), and the owner it starts when the acquiring context carries
	// none.
	first    Lock
	firstArr [1]*Lock
	newOwner owner
}

// lossMargin is how long before the server-side lease can end that the
// core gives up on a lock: a tenth of the TTL, which also covers clock rate
// differences between client and server (assumed well under 1%).
func lossMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// init makes h a new acquisition of its lease by l for own, taken by a
// call with context ctx, with the given fence, whose lease began at start.
func (h *held) init(l *Locker, ctx context.Context, own *owner, fence uint64, start time.Time) {
	h.l, h.owner, h.start = l, own, start
	h.lease.Fence, h.lease.Takeover = fence, "" // every renewal checks the token
	h.parent = ownerContext{values: ctx, owner: own}
	h.index = [3]int{-1, -1, -1}
	h.handles = h.firstArr[:0]
	h.extended(start, h.lease.TTL)
}

// extended records a successful acquire or refresh whose request was sent
// at start and asked for a lease of ttl: the server's lease cannot end
// before start+ttl. Called with l.mu held (or before h is shared).
func (h *held) extended(start time.Time, ttl time.Duration) {
	if h.state != active {
		return
	}
	if d := start.Add(ttl - lossMargin(ttl)); d.After(h.deadline) {
		h.deadline = d
		h.l.books.deadlines.fix(h)
	}
	h.nextRenew = start.Add(h.lease.TTL / 3)
	h.l.books.renewals.fix(h)
	if w := start.Add(warnAfter(h.lease.TTL)); w.After(h.warnAt) {
		h.warnAt = w
		if h.watched {
			h.l.books.warnings.remove(h)
			h.l.books.warnings.push(h)
		}
	}
	h.recovered()
}

// newHandle returns a new handle on h. Called with l.mu held.
//
// Each handle's context is a child of h.parent, not of a context of the
// acquisition that all handles share: a loss cancels the open handles
// one by one (see cancelHandles), which costs a loop instead of a
// context, a cancel func and a children map per acquisition.
func (h *held) newHandle() *Lock {
	k := &h.first
	if k.h != nil {
		k = new(Lock)
	}
	k.h, k.index = h, len(h.handles)
	k.ctx, k.cancel = context.WithCancelCause(&h.parent)
	h.handles = append(h.handles, k)
	return k
}

// values returns the acquiring call's context without its cancellation,
// for hooks.
func (h *held) values() context.Context { return context.WithoutCancel(h.parent.values) }

// dropHandle removes k from h's open handles. Called with l.mu held.
func (h *held) dropHandle(k *Lock) {
	n := len(h.handles) - 1
	m := h.handles[n]
	h.handles[k.index], m.index = m, k.index
	h.handles[n] = nil
	h.handles = h.handles[:n]
}

// cancelHandles closes the Done of every open handle of h with cause.
// Called with l.mu held.
func (h *held) cancelHandles(cause error) {
	for _, k := range h.handles {
		k.cancel(cause)
		k.endWarnings()
	}
}
