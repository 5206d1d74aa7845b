// Package memlock is an in-process dlock backend: locks live in a Store in
// memory, shared by the Lockers made from it.
//
// Use it in unit tests of code that takes a *dlock.Locker, and wherever
// goroutines of one process are the only contenders. It keeps the whole
// contract (leases, renewal, loss signal, reentrancy, fencing, woken
// waiters) and works under testing/synctest, since it measures time with
// the standard clock.
package memlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
)

// Store holds the state of in-memory locks. The zero value is not usable;
// call NewStore. A Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	locks    map[string]entry
	fence    uint64 // last token issued, for any name
	watchers map[string]map[chan struct{}]struct{}
}

type entry struct {
	owner    string
	fence    uint64
	expires  time.Time
	metadata string
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		locks:    make(map[string]entry),
		watchers: make(map[string]map[chan struct{}]struct{}),
	}
}

// New returns a Locker on store. Lockers on one Store exclude each other
// like processes sharing a server. A nil store means a new private Store.
// It returns an error like every backend's constructor; with memlock
// there is nothing that can fail, so the error is always nil.
func New(store *Store) (*dlock.Locker, error) {
	if store == nil {
		store = NewStore()
	}
	return backend.New(store.Driver(), nil), nil
}

// Driver returns the store's driver, for tests that wrap it to inject
// faults or count calls before passing it to backend.New. It implements
// driver.Notifier.
func (s *Store) Driver() driver.Driver { return &memDriver{s: s} }

// Expire removes the lock on name whatever its owner, as if its lease had
// run out or an administrator had deleted it, and wakes waiters. It
// reports whether name was held.
func (s *Store) Expire(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live(name)
	delete(s.locks, name)
	s.wake(name)
	return ok
}

// Holder returns the owner and fencing token of the current lease on name,
// and whether there is one.
func (s *Store) Holder(name string) (owner string, fence uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(name)
	return e.owner, e.fence, ok
}

// live returns name's unexpired entry. Called with s.mu held.
func (s *Store) live(name string) (entry, bool) {
	e, ok := s.locks[name]
	if ok && !time.Now().Before(e.expires) {
		delete(s.locks, name)
		return entry{}, false
	}
	return e, ok
}

// wake signals name's watchers. Called with s.mu held.
func (s *Store) wake(name string) {
	for ch := range s.watchers[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// The optional interfaces memDriver implements, checked at compile time.
var (
	_ driver.Notifier        = (*memDriver)(nil)
	_ driver.Inspector       = (*memDriver)(nil)
	_ driver.ForceReleaser   = (*memDriver)(nil)
	_ driver.ContextHonourer = (*memDriver)(nil)
)

type memDriver struct{ s *Store }

func (d *memDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e, ok := s.live(l.Name)
	switch {
	case !ok:
		s.fence++
		e = entry{owner: l.Owner, fence: s.fence, metadata: l.Metadata}
	case e.owner != l.Owner:
		return driver.Result{Remaining: e.expires.Sub(now)}, nil
	}
	e.expires = now.Add(l.TTL)
	s.locks[l.Name] = e
	return driver.Result{Acquired: true, Fence: e.fence}, nil
}

func (d *memDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i, l := range ls {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		e, ok := s.live(l.Name)
		if !ok || e.owner != l.Owner {
			errs[i] = fmt.Errorf("memlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
			continue
		}
		e.expires = now.Add(l.TTL)
		s.locks[l.Name] = e
	}
	return errs
}

func (d *memDriver) Release(ctx context.Context, l driver.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(l.Name)
	if !ok || e.owner != l.Owner {
		return fmt.Errorf("memlock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	delete(s.locks, l.Name)
	s.wake(l.Name)
	return nil
}

func (d *memDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.watchers[name]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		s.watchers[name] = m
	}
	m[ch] = struct{}{}
	stop := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers[name], ch)
		if len(s.watchers[name]) == 0 {
			delete(s.watchers, name)
		}
	}
	return ch, stop, nil
}

func (d *memDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(names) == 0 {
		for n := range s.locks {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var hs []driver.Holder
	now := time.Now()
	for _, n := range names {
		if e, ok := s.live(n); ok {
			hs = append(hs, driver.Holder{Name: n, Owner: e.owner, Fence: e.fence, Remaining: e.expires.Sub(now), Metadata: e.metadata})
		}
	}
	return hs, nil
}

func (d *memDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	return d.s.Expire(name), nil
}

// HonoursContext implements driver.ContextHonourer: no call blocks.
func (d *memDriver) HonoursContext() bool { return true }

func (d *memDriver) Close() error { return nil }
