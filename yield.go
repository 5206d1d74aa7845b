package dlock

import (
	"sync/atomic"
	"time"
)

// yieldBook keeps, per name, what makes this Locker yield a name it
// released to waiters of other Lockers, on a store that wakes waiters
// (driver.Notifier) but does not queue them (no driver.Queuer): SQL
// stores, memlock, NATS, Kubernetes.
//
// On such a store whoever tries first after a release gets the name. The
// releasing Locker would nearly always be first: it rings its own front
// waiter at once (wakeLocal), its goroutine that released may try again
// at once, and its process is running, while another Locker hears of the
// release through the store's notification, about one store step later,
// in a process that may have to be scheduled first. A process that holds
// a hot name would then keep it among its own goroutines: `dlock demo` on
// SQLite gave Jain's index over its 4 processes 0.72 to 0.84, where a
// goroutine hop on the release path that made the releasing Locker a few
// microseconds slower had given 0.96 (bisected to 0a1c4f2, which took the
// hop out).
//
// So once a waiting attempt of this Locker found a name held while the
// Locker itself held nothing of it (another Locker had it), for
// contendedMemory afterwards every release of the name by this Locker
// holds back this Locker's own attempts on it (waiters woken by the
// release, and new Acquire calls) for as long as the release step took,
// at most maxYield: about as long as the release's notification takes
// to reach the other Lockers' waiters. A Locker whose waiters only ever
// wait for its own holds never yields, and TryAcquire never waits.
type yieldBook struct {
	n     atomic.Int64         // len(names), so that the common case takes no lock
	names map[string]yieldMark // guarded by l.mu
}

// yieldMark is a name's entry in a yieldBook.
type yieldMark struct {
	foreign time.Time // a waiting attempt last found the name held by another Locker
	until   time.Time // this Locker's attempts on the name wait until then
}

const (
	// contendedMemory is how long a Locker keeps yielding a name after it
	// last saw another Locker hold it.
	contendedMemory = 10 * time.Second
	// maxYield bounds one yield, whatever the release step took.
	maxYield = 20 * time.Millisecond
	// maxYieldBook bounds the names a yieldBook remembers; a name dropped
	// from it is not yielded until another Locker is seen holding it again.
	maxYieldBook = 1024
)

// yielding reports whether this Locker's store is one it yields names on.
func (l *Locker) yielding() bool { return l.notifier != nil && l.queuer == nil }

// noteContended records that a waiting attempt on name failed at now. If
// this Locker holds nothing of name, another Locker holds it.
func (l *Locker) noteContended(name string, now time.Time) {
	if !l.yielding() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.yields
	if l.books.names[name] > 0 {
		return
	}
	if b.names == nil {
		b.names = make(map[string]yieldMark)
	}
	m, ok := b.names[name]
	if !ok && len(b.names) >= maxYieldBook {
		for k, old := range b.names {
			if now.Sub(old.foreign) >= contendedMemory {
				delete(b.names, k)
			}
		}
		for k := range b.names {
			if len(b.names) < maxYieldBook {
				break
			}
			delete(b.names, k) // any one: it is only yielded again once seen again
		}
	}
	m.foreign = now
	b.names[name] = m
	b.n.Store(int64(len(b.names)))
}

// noteReleased records that this Locker released its last hold of name
// at now, in a step that took step. If another Locker held name within
// contendedMemory, this Locker's attempts on name wait for step (at most
// maxYield) from now.
func (l *Locker) noteReleased(name string, now time.Time, step time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.yields
	m, ok := b.names[name]
	switch {
	case !ok:
	case now.Sub(m.foreign) >= contendedMemory:
		delete(b.names, name)
		b.n.Store(int64(len(b.names)))
	default:
		m.until = now.Add(min(step, maxYield))
		b.names[name] = m
	}
}

// yieldFor returns how long this Locker's next attempt on name waits.
func (l *Locker) yieldFor(name string) time.Duration {
	if l.yields.n.Load() == 0 {
		return 0
	}
	l.mu.Lock()
	m := l.yields.names[name]
	l.mu.Unlock()
	if m.until.IsZero() {
		return 0
	}
	return time.Until(m.until)
}

// yield waits before a waiting attempt of a as long as yieldFor says. The
// error says a's ctx ended or the Locker closed.
func (l *Locker) yield(a *attempt) error {
	d := l.yieldFor(a.lease.Name)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-a.ctx.Done():
		return gaveUp(a)
	case <-l.closing:
		return errorf("dlock: acquire %s: %w", quote(a.lease.Name), ErrClosed)
	}
}
