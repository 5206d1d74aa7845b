package sessionlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Config configures a Leases. E identifies a queue entry on the server
// (a znode's path, a key and its create revision) and the session it
// lives on.
type Config[E comparable] struct {
	// Name prefixes the errors of Acquire and AcquireQueued: the
	// backend's package name.
	Name string

	// Remove deletes e's entry on the server as an owner-checked step (it
	// never removes another acquisition's entry); a missing entry is not
	// an error. It returns an error only when a later attempt may succeed:
	// e then stays an orphan.
	Remove func(ctx context.Context, e E) error

	// Live, if not nil, reports whether e's session still lives. Hold and
	// Extend refuse an entry whose session is dead. It is called with the
	// table's mutex held.
	Live func(e E) bool
}

// Leases is a driver's book of the leases it holds, by owner. Its methods
// are safe for concurrent use.
//
// A lease's deadline is its TTL from the send time of the step that last
// confirmed it on the server (the read that found the entry at the head
// of its queue, then each refresh). The core measures its own loss
// deadline from the same moment or an earlier one, and gives up a tenth
// of the TTL before it, so the driver never removes an entry whose holder
// may still trust its lock. A lease whose deadline passes is forgotten and
// its entry removed, from a timer's goroutine.
//
// Entries to remove that the store could not take yet are orphans; the
// driver reaps them when its connection allows (StartReap) and at
// Close.
type Leases[E comparable] struct {
	cfg     Config[E]
	losses  chan driver.Loss
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	changed chan struct{} // buffered(1): a lease or orphan was added

	mu      sync.Mutex
	closed  bool
	held    map[string]*lease[E] // by owner
	orphans map[E]struct{}
	reaping bool           // a reaper goroutine runs
	bg      sync.WaitGroup // expiries, the reaper and loss reports; Add only with mu held and !closed
}

type lease[E comparable] struct {
	entry E
	fence uint64
	ttl   time.Duration

	// Guarded by Leases.mu.
	deadline time.Time
	timer    *time.Timer // runs expire at deadline
}

// New returns an empty Leases.
func New[E comparable](cfg Config[E]) *Leases[E] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Leases[E]{
		cfg:     cfg,
		losses:  make(chan driver.Loss, 16),
		ctx:     ctx,
		cancel:  cancel,
		changed: make(chan struct{}, 1),
		held:    make(map[string]*lease[E]),
		orphans: make(map[E]struct{}),
	}
}

// Losses returns the channel that receives the leases Lose forgets; it is
// the driver's driver.LossReporter channel. Wait closes it.
func (t *Leases[E]) Losses() <-chan driver.Loss { return t.losses }

// Changed returns a channel that receives a value (sends never block)
// when a lease or an orphan is added: a driver goroutine that idles while
// Busy is false waits on it.
func (t *Leases[E]) Changed() <-chan struct{} { return t.changed }

// Busy reports whether the table holds leases or orphans.
func (t *Leases[E]) Busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held) > 0 || len(t.orphans) > 0
}

// Hold records that owner holds its lock through entry e, with fencing
// token fence, for ttl from start: the send time of the step that found
// e at the head of its queue. It returns the Result for the core, with
// LeaseStart start. It fails with dlock.ErrClosed once the table is
// closed, and with ErrGone if e's session is dead.
func (t *Leases[E]) Hold(owner string, e E, fence uint64, ttl time.Duration, start time.Time) (driver.Result, error) {
	ls := &lease[E]{entry: e, fence: fence, ttl: ttl, deadline: start.Add(ttl)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return driver.Result{}, dlock.ErrClosed
	}
	if t.cfg.Live != nil && !t.cfg.Live(e) {
		return driver.Result{}, ErrGone
	}
	if old := t.held[owner]; old != nil {
		old.timer.Stop()
	}
	ls.timer = time.AfterFunc(time.Until(ls.deadline), func() { t.expire(owner, ls) })
	t.held[owner] = ls
	t.wake()
	return driver.Result{Acquired: true, Fence: fence, LeaseStart: start}, nil
}

// Err returns dlock.ErrClosed once the table is closed, else nil.
func (t *Leases[E]) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return dlock.ErrClosed
	}
	return nil
}

// Held returns the entry and fencing token of owner's lease, if it holds
// one.
func (t *Leases[E]) Held(owner string) (e E, fence uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ls := t.held[owner]; ls != nil {
		return ls.entry, ls.fence, true
	}
	return e, 0, false
}

// Extend moves the deadline of owner's lease to its TTL from start, the
// send time of a step that found e still in place on the server. It
// reports false, and changes nothing, if owner's lease is no longer e's
// (it expired, was lost or released while the step was in flight) or e's
// session is dead.
func (t *Leases[E]) Extend(owner string, e E, start time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.held[owner]
	if ls == nil || ls.entry != e || (t.cfg.Live != nil && !t.cfg.Live(e)) {
		return false
	}
	if d := start.Add(ls.ttl); d.After(ls.deadline) {
		ls.deadline = d
		ls.timer.Reset(time.Until(d))
	}
	return true
}

// Drop forgets owner's lease, if any, and returns its entry.
func (t *Leases[E]) Drop(owner string) (e E, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.held[owner]
	if ls == nil {
		return e, false
	}
	ls.timer.Stop()
	delete(t.held, owner)
	return ls.entry, true
}

// Orphan records e to remove once the store allows, unless the table is
// closed.
func (t *Leases[E]) Orphan(e E) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.orphans[e] = struct{}{}
		t.wake()
	}
}

// Lose forgets every lease whose entry cause reports an error for, makes
// their entries orphans, and sends a driver.Loss with that error for each
// on Losses, in order, from a goroutine of the table's that exits once
// they are sent or the table closes. Lose itself does not block: its
// caller may be an acquisition that the core waits for before it stops
// the driver, while the core no longer reads Losses.
func (t *Leases[E]) Lose(cause func(e E) error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	var lost []driver.Loss
	for owner, ls := range t.held {
		err := cause(ls.entry)
		if err == nil {
			continue
		}
		ls.timer.Stop()
		delete(t.held, owner)
		t.orphans[ls.entry] = struct{}{}
		lost = append(lost, driver.Loss{Owner: owner, Err: err})
	}
	if len(lost) == 0 {
		t.mu.Unlock()
		return
	}
	t.wake()
	// Counted in bg, with mu held and the table open, so that Wait never
	// closes losses under a send.
	t.bg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.bg.Done()
		for _, loss := range lost {
			select {
			case t.losses <- loss:
			case <-t.ctx.Done():
				return
			}
		}
	}()
}

// reapAll removes the current orphans, one Remove each, until ctx ends.
func (t *Leases[E]) reapAll(ctx context.Context) {
	t.mu.Lock()
	es := make([]E, 0, len(t.orphans))
	for e := range t.orphans {
		es = append(es, e)
	}
	t.mu.Unlock()
	for _, e := range es {
		if ctx.Err() != nil {
			return
		}
		t.reap(ctx, e)
	}
}

// StartReap removes the orphans in a goroutine of the table's, unless
// one is running or there is nothing to reap, so that a slow store never
// delays its caller. The goroutine exits after one Remove per orphan,
// bounded by CleanupTimeout and by Close.
func (t *Leases[E]) StartReap() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reaping || t.closed || len(t.orphans) == 0 {
		return
	}
	t.reaping = true
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		ctx, cancel := context.WithTimeout(t.ctx, CleanupTimeout)
		defer cancel()
		t.reapAll(ctx)
		t.mu.Lock()
		t.reaping = false
		t.mu.Unlock()
	}()
}

// Close marks the table closed: Hold fails, Orphan and Lose do nothing,
// pending deadlines are stopped and loss reports give up. It returns the
// entries of the leases still held and the orphans, for the driver to
// remove. Then the driver calls Wait.
func (t *Leases[E]) Close() []E {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	var es []E
	for _, ls := range t.held {
		ls.timer.Stop()
		es = append(es, ls.entry)
	}
	for e := range t.orphans {
		es = append(es, e)
	}
	t.held, t.orphans = map[string]*lease[E]{}, map[E]struct{}{}
	t.mu.Unlock()
	t.cancel()
	return es
}

// Wait waits, after Close, for the table's goroutines and loss reports
// to end, then closes the Losses channel.
func (t *Leases[E]) Wait() {
	t.bg.Wait()
	close(t.losses)
}

// expire forgets a lease whose deadline passed without a refresh and
// removes its entry. It runs in the lease's timer goroutine, which exits
// after one Remove bounded by CleanupTimeout; Wait waits for it.
func (t *Leases[E]) expire(owner string, ls *lease[E]) {
	t.mu.Lock()
	if t.closed || t.held[owner] != ls || time.Now().Before(ls.deadline) {
		t.mu.Unlock() // closed, released, or extended (the timer was reset)
		return
	}
	delete(t.held, owner)
	t.orphans[ls.entry] = struct{}{}
	t.bg.Add(1)
	t.mu.Unlock()
	defer t.bg.Done()
	ctx, cancel := CleanupContext()
	defer cancel()
	t.reap(ctx, ls.entry)
}

// reap removes orphan e, which stays an orphan if Remove fails.
func (t *Leases[E]) reap(ctx context.Context, e E) {
	if err := t.cfg.Remove(ctx, e); err != nil {
		return
	}
	t.mu.Lock()
	delete(t.orphans, e)
	t.mu.Unlock()
}

func (t *Leases[E]) wake() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}
