package dlock

import (
	"time"

	"github.com/dlock-go/dlock/hook"
)

// books are the Locker's records of its active acquisitions, each in all
// three from track to forget. Guarded by l.mu.
type books struct {
	held      map[string]*held // by owner string
	names     map[string]int32 // how many of held are on each name, where the Locker yields (see yieldBook)
	deadlines heldHeap         // soonest loss deadline first
	renewals  heldHeap         // renewed and not being renewed now, soonest renewal first
	warnings  heldHeap         // watched (see Lock.Warnings) and not at risk, soonest warning first
}

// track adds a new acquisition to the Locker's books and makes the keeper
// look at it in time. Called with l.mu held.
func (l *Locker) track(h *held) {
	l.books.held[h.lease.Owner] = h
	if l.yielding() {
		l.books.names[h.lease.Name]++
	}
	l.books.deadlines.push(h)
	next := h.deadline
	if h.renew {
		l.books.renewals.push(h)
		next = earliest(next, h.nextRenew)
	}
	l.schedule(next)
}

// forget removes h from the Locker's books and sets its final state.
// Called with l.mu held.
func (l *Locker) forget(h *held, s state) {
	if h.state != active {
		return
	}
	h.state = s
	delete(l.books.held, h.lease.Owner)
	if l.yielding() {
		if n := l.books.names[h.lease.Name] - 1; n > 0 {
			l.books.names[h.lease.Name] = n
		} else {
			delete(l.books.names, h.lease.Name)
		}
	}
	l.books.deadlines.remove(h)
	l.books.renewals.remove(h)
	l.books.warnings.remove(h)
	h.owner.drop(h)
	l.stepDone()
}

// lose marks h lost, closes its handles' Done with cause, and wakes local
// waiters on its name. Called with l.mu held, which the caller releases
// with l.unlock so that hooks hear of the loss.
func (l *Locker) lose(h *held, reason hook.LossReason, cause error) {
	if h.state != active {
		return
	}
	l.forget(h, lost)
	h.cause = cause
	h.cancelHandles(cause)
	l.wakeLocalLocked(h.lease.Name)
	if l.hooks.Load() != nil {
		l.lostPending = append(l.lostPending, lossRecord{h: h, reason: reason, cause: cause, at: time.Now()})
	}
}

// loseLapsed is lose for a lock whose loss deadline passed before a
// renewal succeeded. The cause wraps the last renewal's error, if one
// failed (ErrDenied, say). Called with l.mu held.
func (l *Locker) loseLapsed(h *held) {
	if h.renewErr != nil {
		l.lose(h, hook.LossExpired, errorf("%w: lease of %v could not be renewed in time: %w", ErrLost, h.lease.TTL, h.renewErr))
		return
	}
	l.lose(h, hook.LossExpired, errorf("%w: lease of %v could not be renewed in time", ErrLost, h.lease.TTL))
}

// heldHeap orders acquisitions by their loss deadline or by their next
// renewal, so that the keeper finds what is due without scanning every
// held lock. Each held records its position in both heaps; the keys are
// kept in the heap itself (as offsets from a fixed monotonic instant) so
// that ordering does not chase pointers.
type heldHeap struct {
	kind  int       // byDeadline or byRenewal: also the index into held.index
	epoch time.Time // keys are offsets from here, on the monotonic clock
	items []heapItem
}

type heapItem struct {
	at time.Duration // the key: deadline or nextRenew, minus epoch
	h  *held
}

const (
	byDeadline = 0
	byRenewal  = 1
	byWarning  = 2
)

func newHeldHeap(kind int, epoch time.Time) heldHeap {
	return heldHeap{kind: kind, epoch: epoch}
}

func (q *heldHeap) key(h *held) time.Duration {
	switch q.kind {
	case byDeadline:
		return h.deadline.Sub(q.epoch)
	case byRenewal:
		return h.nextRenew.Sub(q.epoch)
	}
	return h.warnAt.Sub(q.epoch)
}

// top returns the first acquisition, or nil.
func (q *heldHeap) top() *held {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0].h
}

func (q *heldHeap) push(h *held) {
	if h.index[q.kind] >= 0 {
		return
	}
	q.items = append(q.items, heapItem{at: q.key(h), h: h})
	h.index[q.kind] = len(q.items) - 1
	q.up(len(q.items) - 1)
}

func (q *heldHeap) pop() *held {
	h := q.items[0].h
	q.remove(h)
	return h
}

func (q *heldHeap) remove(h *held) {
	i := h.index[q.kind]
	if i < 0 {
		return
	}
	n := len(q.items) - 1
	if i != n {
		q.swap(i, n)
	}
	q.items[n] = heapItem{}
	q.items = q.items[:n]
	h.index[q.kind] = -1
	if i != n && !q.down(i) {
		q.up(i)
	}
}

// fix restores the order after h's key changed, if h is in q.
func (q *heldHeap) fix(h *held) {
	if i := h.index[q.kind]; i >= 0 {
		q.items[i].at = q.key(h)
		if !q.down(i) {
			q.up(i)
		}
	}
}

// clear empties q in O(n).
func (q *heldHeap) clear() {
	for _, it := range q.items {
		it.h.index[q.kind] = -1
	}
	q.items = nil
}

// up moves the item at i towards the root while it is earlier than its
// parent. (Written out rather than with container/heap, whose interface
// boxes every item pushed and popped: an allocation each.)
func (q *heldHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if q.items[p].at <= q.items[i].at {
			return
		}
		q.swap(i, p)
		i = p
	}
}

// down moves the item at i away from the root while a child is earlier,
// and reports whether it moved.
func (q *heldHeap) down(i int) bool {
	start, n := i, len(q.items)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && q.items[r].at < q.items[c].at {
			c = r
		}
		if q.items[i].at <= q.items[c].at {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > start
}

func (q *heldHeap) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].h.index[q.kind] = i
	q.items[j].h.index[q.kind] = j
}
