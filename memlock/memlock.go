// Package memlock is an in-process dlock backend: locks live in a Store in
// memory, shared by the Lockers made from it.
//
// Use it in unit tests of code that takes a *dlock.Locker, and wherever
// goroutines of one process are the only contenders. Importing it registers
// mem://[name] with dlock.Open: Lockers opened with the same name share one
// Store in the process (mem:// names the store ""); it takes no query
// parameters.
//
// # Guarantees
//
// It keeps the whole contract (leases, renewal, loss signal, reentrancy,
// fencing, woken waiters, shared holds with a waiting writer's intent, and
// semaphores) and works under testing/synctest, since it measures time with
// the standard clock. Leases run on the monotonic clock of the process, so
// no clock step can end one early: memlock never sets Result.Stamp and
// ignores Lease.Takeover. Refresh checks the token (Lease.Fence) as well as
// the owner. Fencing tokens come from a counter. Locker.Observe is pushed
// every change.
//
// # Limits
//
// Locks in memory are not shared between processes, and end with the
// process.
//
// # Example
//
//	locker, _ := memlock.New(nil) // a private Store; memlock.New cannot fail
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "stock/sku-42")
//
// The root package's examples (go doc -all github.com/dlock-go/dlock) all
// run on memlock.
package memlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Store holds the state of in-memory locks. The zero value is not usable;
// call NewStore. A Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	names    map[string]*entry
	fence    uint64                                 // last token issued, for any name
	watchers map[string]map[chan struct{}]watchKind // by name
	spare    []*entry                               // emptied entries, reused by Acquire
	scope    string                                 // "store-N", N counting this process's Stores
}

// stores counts the Stores made, for their scopes.
var stores atomic.Uint64

// maxSpare bounds Store.spare.
const maxSpare = 64

// entry is the state of one name: its holders (one exclusive, any number
// shared, or up to limit permits) and a waiting writer's intent.
type entry struct {
	holders       []holder
	limit         int // a semaphore's; 0 for a lock
	intent        string
	intentExpires time.Time
}

type holder struct {
	owner    string
	fence    uint64
	expires  time.Time // the lease's end, lock-delay included
	delay    time.Duration
	metadata string
	shared   bool
}

type watchKind bool

const (
	releases watchKind = false // Notifier: woken when the name may be free
	changes  watchKind = true  // ChangeNotifier: woken on every change
)

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		names:    make(map[string]*entry),
		watchers: make(map[string]map[chan struct{}]watchKind),
		scope:    "store-" + strconv.FormatUint(stores.Add(1), 10),
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
	return dlock.NewLocker(store.Driver(), driver.LockerOptions{}), nil
}

// Driver returns the store's driver, for tests that wrap it to inject
// faults or count calls before passing it to dlock.NewLocker. It implements
// driver.Notifier, driver.ChangeNotifier and driver.MultiHolder.
func (s *Store) Driver() driver.Driver { return &memDriver{s: s} }

// Expire removes every holder of name (and a waiting writer's intent)
// whatever their owners, as if their leases had run out or an
// administrator had deleted them, and wakes waiters. It reports whether
// name was held.
func (s *Store) Expire(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(name)
	delete(s.names, name)
	s.wake(name, true)
	return e != nil && len(e.holders) > 0
}

// Holder returns the owner and fencing token of a current lease on name
// (the oldest, for a name held shared or as a semaphore), and whether
// there is one.
func (s *Store) Holder(name string) (owner string, fence uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(name)
	if e == nil || len(e.holders) == 0 {
		return "", 0, false
	}
	return e.holders[0].owner, e.holders[0].fence, true
}

// live returns name's entry without its expired holders and intent, or
// nil if nothing of it is left. Called with s.mu held.
func (s *Store) live(name string) *entry {
	e := s.names[name]
	if e == nil {
		return nil
	}
	now := time.Now()
	n := len(e.holders)
	e.holders = slices.DeleteFunc(e.holders, func(h holder) bool { return !now.Before(h.expires) })
	if e.intent != "" && !now.Before(e.intentExpires) {
		e.intent = ""
	}
	if len(e.holders) != n {
		s.wake(name, true)
	}
	if len(e.holders) == 0 && e.intent == "" {
		delete(s.names, name)
		if len(s.spare) < maxSpare {
			*e = entry{holders: e.holders[:0]}
			s.spare = append(s.spare, e)
		}
		return nil
	}
	return e
}

// find returns the index of owner's hold in e, or -1.
func (e *entry) find(owner string) int {
	if e == nil {
		return -1
	}
	return slices.IndexFunc(e.holders, func(h holder) bool { return h.owner == owner })
}

// wake signals name's watchers: all of them when the name may be free,
// only those watching every change otherwise. Called with s.mu held.
func (s *Store) wake(name string, freed bool) {
	for ch, kind := range s.watchers[name] {
		if freed || kind == changes {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// The optional interfaces memDriver implements, checked at compile time.
var (
	_ driver.Notifier        = (*memDriver)(nil)
	_ driver.ChangeNotifier  = (*memDriver)(nil)
	_ driver.MultiHolder     = (*memDriver)(nil)
	_ driver.Inspector       = (*memDriver)(nil)
	_ driver.Extender        = (*memDriver)(nil)
	_ driver.Resumer         = (*memDriver)(nil)
	_ driver.LockDelayer     = (*memDriver)(nil)
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
	e := s.live(l.Name)
	if i := e.find(l.Owner); i >= 0 {
		e.holders[i].expires, e.holders[i].delay = now.Add(l.TTL+l.Delay), l.Delay // a retry whose reply was lost
		return driver.Result{Acquired: true, Fence: e.holders[i].fence}, nil
	}
	if e == nil {
		if n := len(s.spare); n > 0 {
			e, s.spare = s.spare[n-1], s.spare[:n-1]
		} else {
			e = &entry{}
		}
		s.names[l.Name] = e
	}
	if len(e.holders) > 0 && e.limit != l.Limit {
		return driver.Result{}, fmt.Errorf("memlock: acquire %q as %s: held as %s: %w", l.Name, mode(l.Limit), mode(e.limit), driver.ErrMode)
	}
	if blocker, ok := e.blocks(l, now); ok {
		res := driver.Result{Remaining: blocker.Sub(now)}
		if l.Waiting && !l.Shared && l.Limit == 0 && e.holders[0].shared && (e.intent == "" || e.intent == l.Owner) {
			// A writer waits behind readers: later readers wait for it.
			e.intent, e.intentExpires = l.Owner, now.Add(l.TTL)
			res.Queued = true
		}
		return res, nil
	}
	if e.intent == l.Owner {
		e.intent = ""
	}
	s.fence++
	e.limit = l.Limit
	e.holders = append(e.holders, holder{owner: l.Owner, fence: s.fence, expires: now.Add(l.TTL + l.Delay), delay: l.Delay, metadata: l.Metadata, shared: l.Shared})
	s.wake(l.Name, false)
	return driver.Result{Acquired: true, Fence: s.fence}, nil
}

// blocks reports whether e keeps l out, and if so until when at the
// latest (the end of the earliest lease or intent in the way).
func (e *entry) blocks(l driver.Lease, now time.Time) (time.Time, bool) {
	var until time.Time
	in := func(t time.Time) {
		if until.IsZero() || t.Before(until) {
			until = t
		}
	}
	switch {
	case l.Limit > 0:
		if len(e.holders) < l.Limit {
			return until, false
		}
		for _, h := range e.holders {
			in(h.expires)
		}
	case l.Shared:
		for _, h := range e.holders {
			if !h.shared {
				in(h.expires)
			}
		}
		if e.intent != "" && e.intent != l.Owner {
			in(e.intentExpires)
		}
	default:
		for _, h := range e.holders {
			in(h.expires)
		}
	}
	return until, !until.IsZero()
}

func mode(limit int) string {
	if limit > 0 {
		return fmt.Sprintf("a semaphore of %d", limit)
	}
	return "a lock"
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
		e := s.live(l.Name)
		j := e.find(l.Owner)
		if j < 0 {
			errs[i] = fmt.Errorf("memlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
			continue
		}
		if l.Fence != 0 && e.holders[j].fence != l.Fence {
			errs[i] = fmt.Errorf("memlock: refresh %q: the owner holds it with token %d, not %d: %w", l.Name, e.holders[j].fence, l.Fence, driver.ErrNotHeld)
			continue
		}
		e.holders[j].expires, e.holders[j].delay = now.Add(l.TTL+l.Delay), l.Delay
	}
	return errs
}

// Extend implements driver.Extender: Refresh sets a lease to its TTL from
// now, whatever it was.
func (d *memDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// LockDelay implements driver.LockDelayer: a hold's lease is kept for
// its TTL plus its delay, and Inspect marks the delay's part.
func (d *memDriver) LockDelay() bool { return true }

// Scope implements driver.Resumer: each Store of the process is a
// namespace of its own.
func (d *memDriver) Scope() string { return d.s.scope }

// Resume implements driver.Resumer.
func (d *memDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(from.Name)
	j := e.find(from.Owner)
	if j < 0 || e.holders[j].fence != from.Fence {
		return driver.Result{}, fmt.Errorf("memlock: resume %q: %w", from.Name, driver.ErrNotHeld)
	}
	e.holders[j].owner, e.holders[j].metadata = to.Owner, to.Metadata
	e.holders[j].expires, e.holders[j].delay = time.Now().Add(to.TTL+to.Delay), to.Delay
	return driver.Result{Acquired: true, Fence: from.Fence}, nil
}

func (d *memDriver) Release(ctx context.Context, l driver.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(l.Name)
	i := e.find(l.Owner)
	if i < 0 {
		if e != nil && e.intent == l.Owner {
			e.intent = "" // a writer gave up waiting
			s.live(l.Name)
			s.wake(l.Name, true)
		}
		return fmt.Errorf("memlock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	e.holders = slices.Delete(e.holders, i, i+1)
	s.live(l.Name) // drops the entry if nothing is left
	s.wake(l.Name, true)
	return nil
}

func (d *memDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watch(name, releases)
}

func (d *memDriver) WatchChanges(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watch(name, changes)
}

func (d *memDriver) watch(name string, kind watchKind) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.watchers[name]
	if m == nil {
		m = make(map[chan struct{}]watchKind)
		s.watchers[name] = m
	}
	m[ch] = kind
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

// MultiHolder implements driver.MultiHolder: shared holds and semaphores.
func (d *memDriver) MultiHolder() bool { return true }

func (d *memDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(names) == 0 {
		for n := range s.names {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var hs []driver.Holder
	now := time.Now()
	for _, n := range names {
		e := s.live(n)
		if e == nil {
			continue
		}
		for _, h := range e.holders {
			hs = append(hs, driver.Holder{Name: n, Owner: h.owner, Fence: h.fence, Remaining: h.expires.Sub(now),
				Metadata: h.metadata, Shared: h.shared, Limit: e.limit, Delayed: !now.Before(h.expires.Add(-h.delay))})
		}
	}
	return hs, nil
}

func (d *memDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	return d.s.Expire(name), nil
}

// HonoursContext implements driver.ContextHonourer: no call blocks.
func (d *memDriver) HonoursContext() bool { return true }

// Backend names the store for hooks.
func (d *memDriver) Backend() string { return "memory" }

func (d *memDriver) Close() error { return nil }
