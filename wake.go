package dlock

import "sync/atomic"

// localWaiters are the Acquire and Observe calls of this Locker waiting on
// a name. A release in this Locker, or a wake-up from the store, makes
// one Acquire call of the name try again, the oldest, never all of them:
// with a thousand waiters on a name, a release costs one attempt per
// Locker, not a thousand (each a round trip, on SQL stores a connection).
// Observe calls are all woken.
type localWaiters struct {
	byName map[string]*nameWaiters // guarded by l.mu
	n      atomic.Int64            // how many, for wakeLocal to skip l.mu when there are none; changed with l.mu held
}

// nameWaiters are the calls of a Locker waiting on one name.
type nameWaiters struct {
	queue     []*waiter // Acquire calls, oldest first: queue[0] is the front
	observers map[chan struct{}]struct{}
}

// waiter is an Acquire call waiting on a name. Only the front of its
// name's queue reacts to wake-ups and keeps the store's subscription;
// the others wait for their turn, so a name costs a Locker one
// subscription, handed down the queue, however many wait on it.
type waiter struct {
	bell chan struct{} // buffered(1): rung when this waiter should look at its turn

	// Guarded by l.mu.
	attempt bool         // the front should attempt at once
	sub     subscription // the store's notifications; only the front has one
	tried   bool         // this waiter, as the front, asked the store for one
}

// subscription is a driver.Notifier's Watch of a name.
type subscription struct {
	wake <-chan struct{} // nil: none
	stop func()
}

func (s subscription) end() {
	if s.stop != nil {
		s.stop()
	}
}

// joinWait queues a new Acquire call on name, and reports whether it is
// the front.
func (l *Locker) joinWait(name string) (*waiter, bool) {
	w := &waiter{bell: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	nw := l.nameWaitersLocked(name)
	nw.queue = append(nw.queue, w)
	l.waiters.n.Add(1)
	return w, len(nw.queue) == 1
}

// leaveWait takes w out of name's queue. If w was the front, the next
// waiter becomes the front, with w's subscription, and attempts at once
// unless w leaves holding the name exclusively (took, so the next cannot
// have it yet: it waits for a wake-up, as w did).
func (l *Locker) leaveWait(name string, w *waiter, tookExclusive bool) {
	l.mu.Lock()
	nw := l.waiters.byName[name]
	i := 0
	for i < len(nw.queue) && nw.queue[i] != w {
		i++
	}
	if i == len(nw.queue) {
		l.mu.Unlock()
		return
	}
	nw.queue = append(nw.queue[:i], nw.queue[i+1:]...)
	l.waiters.n.Add(-1)
	sub := w.sub
	w.sub = subscription{}
	if i == 0 && len(nw.queue) > 0 {
		if tookExclusive {
			// The wake-ups waiting in the subscription are of releases
			// before w took the name, which nobody else can free now.
			drain(sub.wake)
		}
		next := nw.queue[0]
		next.sub, next.tried = sub, sub.wake != nil
		next.attempt = next.attempt || !tookExclusive
		ring(next.bell)
		sub = subscription{}
	}
	l.dropIfIdleLocked(name, nw)
	l.mu.Unlock()
	l.endAside(sub)
}

// endAside ends sub on one of the Locker's goroutines (inline only once
// the Locker is closing, whose Close waits for it either way), so that
// the Acquire call leaving its wait returns without waiting for it. A
// driver's stop may be a request to the store (natslock deletes its
// watch's consumer), which a store restarting or cut off leaves
// unanswered for seconds; an Acquire that took the name and waited for
// that stop handed out a handle whose lease had run out meanwhile, with
// a token older than later grants (the fault suite's nats row under
// restart-server: an Acquire that returned 5 s late with Done closed).
// A waiter that gave up returns promptly as well.
func (l *Locker) endAside(sub subscription) {
	if sub.stop == nil {
		return
	}
	if !l.goBackground(sub.end) {
		sub.end()
	}
}

// turn reports whether w is the front of name's queue, whether it should
// attempt at once (which it clears), and its subscription.
func (l *Locker) turn(name string, w *waiter) (front, attempt bool, sub subscription, tried bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nw := l.waiters.byName[name]
	if nw == nil || len(nw.queue) == 0 || nw.queue[0] != w {
		return false, false, subscription{}, false
	}
	attempt, w.attempt = w.attempt, false
	return true, attempt, w.sub, w.tried
}

// setSubscription records the subscription the front w made (or tried
// to: sub may be empty).
func (l *Locker) setSubscription(w *waiter, sub subscription) {
	l.mu.Lock()
	w.sub, w.tried = sub, true
	l.mu.Unlock()
}

// addWaiter registers an Observe call on name: every release in this
// Locker rings the returned channel.
func (l *Locker) addWaiter(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	nw := l.nameWaitersLocked(name)
	if nw.observers == nil {
		nw.observers = make(map[chan struct{}]struct{})
	}
	nw.observers[ch] = struct{}{}
	l.waiters.n.Add(1)
	return ch
}

func (l *Locker) removeWaiter(name string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nw := l.waiters.byName[name]
	if _, ok := nw.observers[ch]; !ok {
		return
	}
	delete(nw.observers, ch)
	l.waiters.n.Add(-1)
	l.dropIfIdleLocked(name, nw)
}

func (l *Locker) nameWaitersLocked(name string) *nameWaiters {
	nw := l.waiters.byName[name]
	if nw == nil {
		nw = &nameWaiters{}
		l.waiters.byName[name] = nw
	}
	return nw
}

func (l *Locker) dropIfIdleLocked(name string, nw *nameWaiters) {
	if len(nw.queue) == 0 && len(nw.observers) == 0 {
		delete(l.waiters.byName, name)
	}
}

// wakeLocal wakes this Locker's waiters on name: the front Acquire call
// and every Observe call. Called after the step that freed name on the
// store: a waiter that registers after wakeLocal read no waiters makes
// its next attempt after that step, so it needs no wake-up, and
// wakeLocal skips the Locker's mutex.
func (l *Locker) wakeLocal(name string) { l.wakeLocalAfter(name, nil) }

// waitFront returns the front Acquire call waiting on name, or nil.
func (l *Locker) waitFront(name string) *waiter {
	if l.waiters.n.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if nw := l.waiters.byName[name]; nw != nil && len(nw.queue) > 0 {
		return nw.queue[0]
	}
	return nil
}

// wakeLocalAfter is wakeLocal after a step that began when front (from
// waitFront) was the front waiter. If another is the front by now, the
// front it replaced left during the step: woken by the store's
// notification of the same release and took the name, so the next may
// not have it, or gave up and handed the next its attempt (leaveWait).
// Either way the new front needs no wake-up from this release.
func (l *Locker) wakeLocalAfter(name string, front *waiter) {
	if l.waiters.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeLocalLockedAfter(name, front)
}

func (l *Locker) wakeLocalLocked(name string) { l.wakeLocalLockedAfter(name, nil) }

func (l *Locker) wakeLocalLockedAfter(name string, front *waiter) {
	nw := l.waiters.byName[name]
	if nw == nil {
		return
	}
	if len(nw.queue) > 0 && (front == nil || nw.queue[0] == front) {
		nw.queue[0].attempt = true
		ring(nw.queue[0].bell)
	}
	for ch := range nw.observers {
		ring(ch)
	}
}

// drain empties ch without blocking.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// ring sends on a buffered(1) channel without blocking.
func ring(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
