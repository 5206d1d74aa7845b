package dlock

import (
	"context"
	"slices"
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

// goBackground runs f in a goroutine that Close waits for, unless the
// Locker is closing; it reports whether it started f. The goroutines are
// reused: one that has finished waits up to workerIdle for more work, so
// a Locker in steady use neither starts a goroutine per driver call nor
// grows a fresh stack to the depth of the client library each time.
//
// Idle workers form a stack and work goes to the one idle most recently,
// so that steady traffic keeps as many workers busy as it has steps in
// flight, and the ones an outage or a burst started (the bottom of the
// stack) sit idle for workerIdle and exit. (With one channel shared by all
// idle workers, any steady traffic reached each of them in turn, and a
// pool that grew during a 6 s outage never shrank until Close.)
func (l *Locker) goBackground(f func()) bool {
	p := &l.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		w <- f // buffered: the worker takes it when it wakes
		return true
	}
	l.bg.Add(1)
	go l.worker(f)
	return true
}

// workerIdle is how long a worker goroutine waits for more work before
// it exits.
const workerIdle = 5 * time.Second

// workerPool is the Locker's idle background workers (see goBackground).
type workerPool struct {
	mu     sync.Mutex
	closed bool          // Close began: no new work
	idle   []chan func() // the idle workers' inboxes, most recently idle last
}

// close makes goBackground refuse new work.
func (p *workerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
}

// park puts a worker's inbox on top of the idle stack; it reports false
// if the Locker is closing.
func (p *workerPool) park(inbox chan func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.idle = append(p.idle, inbox)
	return true
}

// leave takes a worker's inbox off the idle stack; it reports false if
// goBackground took it first, and so has put work in it.
func (p *workerPool) leave(inbox chan func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.idle { // the oldest idle workers, which time out first, are at the bottom
		if w == inbox {
			p.idle = slices.Delete(p.idle, i, i+1) // clears the freed slot
			return true
		}
	}
	return false
}

// worker runs f, then whatever goBackground hands it, until it has been
// idle for workerIdle or the Locker closes.
func (l *Locker) worker(f func()) {
	defer l.bg.Done()
	inbox := make(chan func(), 1)
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		if !l.pool.park(inbox) {
			return
		}
		idle.Reset(workerIdle)
		select {
		case f = <-inbox:
			continue
		case <-idle.C:
		case <-l.closing:
		}
		if l.pool.leave(inbox) {
			return
		}
		f = <-inbox // handed work as it timed out: run it
	}
}
