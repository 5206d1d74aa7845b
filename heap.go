package dlock

import (
	"container/heap"
	"time"
)

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
)

func newHeldHeap(kind int, epoch time.Time) heldHeap {
	return heldHeap{kind: kind, epoch: epoch}
}

func (q *heldHeap) key(h *held) time.Duration {
	if q.kind == byDeadline {
		return h.deadline.Sub(q.epoch)
	}
	return h.nextRenew.Sub(q.epoch)
}

// top returns the first acquisition, or nil.
func (q *heldHeap) top() *held {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0].h
}

func (q *heldHeap) push(h *held) {
	if h.index[q.kind] < 0 {
		heap.Push(q, heapItem{at: q.key(h), h: h})
	}
}

func (q *heldHeap) pop() *held { return heap.Pop(q).(heapItem).h }

func (q *heldHeap) remove(h *held) {
	if i := h.index[q.kind]; i >= 0 {
		heap.Remove(q, i)
	}
}

// fix restores the order after h's key changed, if h is in q.
func (q *heldHeap) fix(h *held) {
	if i := h.index[q.kind]; i >= 0 {
		q.items[i].at = q.key(h)
		heap.Fix(q, i)
	}
}

// clear empties q in O(n).
func (q *heldHeap) clear() {
	for _, it := range q.items {
		it.h.index[q.kind] = -1
	}
	q.items = nil
}

// The methods of heap.Interface; use push, pop, remove and fix instead.

func (q *heldHeap) Len() int           { return len(q.items) }
func (q *heldHeap) Less(i, j int) bool { return q.items[i].at < q.items[j].at }
func (q *heldHeap) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].h.index[q.kind] = i
	q.items[j].h.index[q.kind] = j
}
func (q *heldHeap) Push(x any) {
	it := x.(heapItem)
	it.h.index[q.kind] = len(q.items)
	q.items = append(q.items, it)
}
func (q *heldHeap) Pop() any {
	n := len(q.items) - 1
	it := q.items[n]
	q.items[n] = heapItem{}
	q.items = q.items[:n]
	it.h.index[q.kind] = -1
	return it
}
