package dlock

import (
	"container/heap"
	"time"
)

// heldHeap orders acquisitions by their loss deadline or by their next
// renewal, so that the keeper finds what is due without scanning every
// held lock. Each held records its position in both heaps.
type heldHeap struct {
	kind  int // byDeadline or byRenewal: also the index into held.index
	items []*held
}

const (
	byDeadline = 0
	byRenewal  = 1
)

func (q *heldHeap) key(h *held) time.Time {
	if q.kind == byDeadline {
		return h.deadline
	}
	return h.nextRenew
}

// top returns the first acquisition, or nil.
func (q *heldHeap) top() *held {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}

func (q *heldHeap) push(h *held) {
	if h.index[q.kind] < 0 {
		heap.Push(q, h)
	}
}

func (q *heldHeap) pop() *held { return heap.Pop(q).(*held) }

func (q *heldHeap) remove(h *held) {
	if i := h.index[q.kind]; i >= 0 {
		heap.Remove(q, i)
	}
}

// fix restores the order after h's key changed, if h is in q.
func (q *heldHeap) fix(h *held) {
	if i := h.index[q.kind]; i >= 0 {
		heap.Fix(q, i)
	}
}

// clear empties q in O(n).
func (q *heldHeap) clear() {
	for _, h := range q.items {
		h.index[q.kind] = -1
	}
	q.items = nil
}

// The methods of heap.Interface; use push, pop, remove and fix instead.

func (q *heldHeap) Len() int           { return len(q.items) }
func (q *heldHeap) Less(i, j int) bool { return q.key(q.items[i]).Before(q.key(q.items[j])) }
func (q *heldHeap) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index[q.kind] = i
	q.items[j].index[q.kind] = j
}
func (q *heldHeap) Push(x any) {
	h := x.(*held)
	h.index[q.kind] = len(q.items)
	q.items = append(q.items, h)
}
func (q *heldHeap) Pop() any {
	n := len(q.items) - 1
	h := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	h.index[q.kind] = -1
	return h
}
