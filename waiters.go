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
	return ch
}

func (l *Locker) removeWaiter(name string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[name], ch)
	if len(l.waiters[name]) == 0 {
		delete(l.waiters, name)
	}
}

// wakeLocal wakes this Locker's waiters on name.
func (l *Locker) wakeLocal(name string) {
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
