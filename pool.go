package dlock

import (
	"slices"
	"sync"
	"time"
)

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
