package dlock

import (
	"context"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
)

// Locker hands out Locks on one store. It is safe for concurrent use. Each
// Locker is a distinct owner identity: two Lockers on the same store
// exclude each other exactly like two processes do.
//
// A Locker runs one background goroutine that renews all its held locks in
// batches and closes the Done channel of any lock whose lease could not be
// renewed in time. Close stops it.
//
// Lockers are made by a backend's constructor (redislock.New,
// sqllock.New, memlock.New, ...) or by Open.
type Locker struct {
	// The store and what its driver can do, set by newLocker.
	drv      driver.Driver
	notifier driver.Notifier   // nil when the driver cannot wake waiters
	queuer   driver.Queuer     // nil when the store does not queue waiters
	multi    bool              // the driver keeps shared holds and semaphores
	delays   bool              // the driver keeps lock-delays (driver.LockDelayer)
	inline   bool              // the driver honours ctx: call it in the caller's goroutine
	minRetry time.Duration     // first backoff of a waiter that is not notified
	maxRetry time.Duration     // longest sleep of a waiter between attempts
	backend  string            // the driver's Backend(), as hooks report it
	errKinds driver.Classifier // nil when the driver cannot tell its store's errors apart (see storeError)

	// The owner strings: id, ':' and the next seq (see ownerString).
	id  string
	seq atomic.Uint64

	// State with its own synchronization.
	hooks           atomic.Pointer[[]hook.Hook]    // nil until AddHook; replaced (with mu held), never changed
	stamps          stampBook                      // what TryAcquire saw of holders in doubt, by name
	pool            workerPool                     // idle worker goroutines (see goBackground)
	late            lateQueue                      // second releases of abandoned steps (see releaseLater)
	cleanupDeadline atomic.Pointer[sharedDeadline] // see cleanupContext
	closeState                                     // the signal Close gives, and what it waits for

	// mu guards the fields below, the fields of held, Lock and owner that
	// say so, and the Add of closeState.acquiring. A step that can lose a
	// lock ends with l.unlock instead of l.mu.Unlock, so that hooks hear of
	// the loss.
	mu          sync.Mutex
	closed      bool          // Close has begun
	books       books         // the active acquisitions (see track)
	keeper      keeperState   // when the keeper runs next (see schedule)
	waiters     localWaiters  // calls of this Locker waiting on a name (see addWaiter)
	yields      yieldBook     // names this Locker yields to other Lockers after releasing
	lostPending []lossRecord  // losses for the hooks, reported by unlock
	stepped     chan struct{} // closed when a step on a lease ends, if anyone waits (see stepWaiter)
}

func newLocker(drv driver.Driver, minRetry, maxRetry time.Duration) *Locker {
	now := time.Now()
	l := &Locker{
		drv:      drv,
		minRetry: minRetry,
		maxRetry: maxRetry,
		backend:  backendName(drv),
		id:       newLockerID(),
		books: books{
			held:      make(map[string]*held),
			names:     make(map[string]int32),
			deadlines: newHeldHeap(byDeadline, now),
			renewals:  newHeldHeap(byRenewal, now),
			warnings:  newHeldHeap(byWarning, now),
		},
		keeper:  keeperState{timer: time.NewTimer(time.Hour), at: now.Add(time.Hour)},
		waiters: localWaiters{byName: make(map[string]*nameWaiters)},
	}
	l.closingCtx, l.closeNow = context.WithCancelCause(context.Background())
	l.closing = l.closingCtx.Done()
	l.notifier, _ = drv.(driver.Notifier)
	l.queuer, _ = drv.(driver.Queuer)
	l.errKinds, _ = drv.(driver.Classifier)
	if m, ok := drv.(driver.MultiHolder); ok {
		l.multi = m.MultiHolder()
	}
	if d, ok := drv.(driver.LockDelayer); ok {
		l.delays = d.LockDelay()
	}
	if h, ok := drv.(driver.ContextHonourer); ok {
		l.inline = h.HonoursContext()
	}
	l.bg.Add(1)
	go l.keep() // exits when closing is closed
	return l
}

// backendName names drv's store: its Describer answer, or its package's
// name.
func backendName(drv driver.Driver) string {
	if d, ok := drv.(driver.Describer); ok {
		return d.Backend()
	}
	t := reflect.TypeOf(drv)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return path.Base(t.PkgPath())
}
