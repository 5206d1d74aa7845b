package main

import (
	"context"
	"sync"
	"sync/atomic"
)

// heldSet is the locks one Locker holds in a held-locks run: taken, and
// released before the Locker's Close (which would release them one at a
// time), by many goroutines.
type heldSet struct {
	lk      locker
	workers int
	unlocks []func(context.Context) error
}

// fill takes the names name(i) for i from the count held so far up to
// to, in parallel.
func (h *heldSet) fill(to int, name func(int) string) error {
	from := len(h.unlocks)
	if to <= from {
		return nil
	}
	h.unlocks = append(h.unlocks, make([]func(context.Context) error, to-from)...)
	return parallel(h.workers, to-from, func(i int) error {
		unlock, err := h.lk.lock(context.Background(), name(from+i))
		h.unlocks[from+i] = unlock
		return err
	})
}

// release releases every lock taken, in parallel.
func (h *heldSet) release() error {
	us := h.unlocks
	h.unlocks = nil
	return parallel(h.workers, len(us), func(i int) error {
		if us[i] == nil {
			return nil
		}
		return us[i](context.Background())
	})
}

// parallel runs f(0) … f(n-1) on workers goroutines and returns the first
// error (by cmpErr's order); a goroutine stops at its first error.
func parallel(workers, n int, f func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := f(int(i)); err != nil {
					errMu.Lock()
					first = cmpErr(first, err)
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
