package dlock

import (
	"context"
	"sync"
	"time"
)

// call runs a driver step and returns its result, or ctx's error as soon
// as ctx ends, whether or not the driver honours ctx (go-redis, for one,
// ignores deadlines unless the client opts in). A step abandoned this way
// keeps running in a goroutine owned by the Locker; when it completes,
// late (if not nil) receives its result, so that an acquisition that
// succeeded after its caller gave up can be released in order.
func call[T any](l *Locker, ctx context.Context, step func() (T, error), late func(T, error)) (T, error) {
	return callGrace(l, ctx, 0, step, late)
}

// callGrace is call that, once ctx ends, still waits up to grace for the
// step to return: for steps that clean up after themselves on ctx's end
// (a queued acquisition leaving its queue), so that the caller returns
// with nothing left behind unless the store does not answer.
func callGrace[T any](l *Locker, ctx context.Context, grace time.Duration, step func() (T, error), late func(T, error)) (T, error) {
	if l.direct(ctx) {
		return step()
	}
	type result struct {
		v   T
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
		ch        = make(chan result, 1)
	)
	if !l.goBackground(func() {
		v, err := step()
		mu.Lock()
		defer mu.Unlock()
		if !abandoned {
			ch <- result{v, err}
			return
		}
		if late != nil {
			late(v, err)
		}
	}) {
		return step() // closing: no new background work; run inline
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case r := <-ch:
			t.Stop()
			return r.v, r.err
		case <-t.C:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-ch:
		return r.v, r.err
	default:
		abandoned = true
		var zero T
		return zero, ctxErr(ctx)
	}
}

// direct reports whether call runs a step with ctx in the caller's
// goroutine: ctx cannot end, or the driver honours it. Hot paths check it
// first to skip making the closures call takes.
func (l *Locker) direct(ctx context.Context) bool {
	return ctx.Done() == nil || l.inline
}
