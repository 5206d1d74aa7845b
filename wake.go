package dlock

import "sync/atomic"

// localWaiters are the Acquire and Observe calls of this Locker waiting on
// a name, woken at once when this Locker releases or loses it, whether or
// not the store can notify.
type localWaiters struct {
	byName map[string]map[chan struct{}]struct{} // guarded by l.mu
	n      atomic.Int64                          // how many, for wakeLocal to skip l.mu when there are none; changed with l.mu held
}

// addWaiter registers a local waiter on name.
func (l *Locker) addWaiter(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.waiters.byName[name]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		l.waiters.byName[name] = m
	}
	m[ch] = struct{}{}
	l.waiters.n.Add(1)
	return ch
}

func (l *Locker) removeWaiter(name string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters.byName[name], ch)
	l.waiters.n.Add(-1)
	if len(l.waiters.byName[name]) == 0 {
		delete(l.waiters.byName, name)
	}
}

// wakeLocal wakes this Locker's waiters on name. Called after the step
// that freed name on the store: a waiter that registers after wakeLocal
// read no waiters makes its next attempt after that step, so it needs no
// wake-up, and wakeLocal skips the Locker's mutex.
func (l *Locker) wakeLocal(name string) {
	if l.waiters.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeLocalLocked(name)
}

func (l *Locker) wakeLocalLocked(name string) {
	for ch := range l.waiters.byName[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
