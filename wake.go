package dlock

// Local waiters: Acquire calls of this Locker waiting on a name, woken at
// once when this Locker releases or loses it, whether or not the store can
// notify.

// addWaiter registers a local waiter on name.
func (l *Locker) addWaiter(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.waiters[name]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		l.waiters[name] = m
	}
	m[ch] = struct{}{}
	l.nwaiters.Add(1)
	return ch
}

func (l *Locker) removeWaiter(name string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[name], ch)
	l.nwaiters.Add(-1)
	if len(l.waiters[name]) == 0 {
		delete(l.waiters, name)
	}
}

// wakeLocal wakes this Locker's waiters on name. Called after the step
// that freed name on the store: a waiter that registers after wakeLocal
// read no waiters makes its next attempt after that step, so it needs no
// wake-up, and wakeLocal skips the Locker's mutex.
func (l *Locker) wakeLocal(name string) {
	if l.nwaiters.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeLocalLocked(name)
}

func (l *Locker) wakeLocalLocked(name string) {
	for ch := range l.waiters[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
