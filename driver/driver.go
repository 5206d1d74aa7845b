// Package driver defines the small interface a dlock backend implements:
// the atomic steps of a lease (take, refresh, release) and optional
// capabilities probed with type assertions.
//
// Applications use package dlock. The waiting loop, the renewal loop, the
// loss signal, reentrancy and validation live there, once, for every
// backend; a driver only talks to its store.
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrNotHeld is returned (possibly wrapped) by Refresh and Release when the
// lease's owner does not hold the name on the server.
var ErrNotHeld = errors.New("driver: lock not held by owner")

// Lease names one acquisition: the lock name, the owner string that the
// server compares on every step, and the lease length.
//
// Owner is unique per acquisition: "<locker id>:<acquisition number>", the
// Locker id 64 random bits in unpadded base64url (11 characters of
// [A-Za-z0-9_-]; earlier versions used 128 bits, 22 characters, and both
// may meet on one store during an upgrade: a driver must not rely on the
// length) and the same for every lease of one Locker, the number in base
// 36. A driver stores and compares it; it may use the Locker id to
// address the Locker (a notification channel of its own, say).
type Lease struct {
	Name  string
	Owner string
	TTL   time.Duration
	// Metadata describes the holder for people (host, pid, command), set
	// with dlock.WithMetadata; often empty. Drivers that implement
	// Inspector store it with the lock and return it.
	Metadata string

	// Shared marks a shared (read) hold, set with dlock.Shared: any
	// number of shared leases hold Name together, and none while an
	// exclusive lease (Shared false, Limit 0) holds it. Only drivers that
	// implement MultiHolder see it set.
	Shared bool

	// Limit, when above 0, makes Name a counting semaphore of Limit
	// permits, set with dlock.WithLimit: up to Limit leases hold Name at
	// once, each with its own owner, TTL and fence. Shared is then false.
	// Only drivers that implement MultiHolder see it set.
	Limit int

	// Waiting is set on the Acquire calls of an acquisition that waits
	// (dlock's Acquire, not TryAcquire) on a driver that is not a Queuer.
	// A MultiHolder driver uses it to keep writers from starving: when a
	// waiting exclusive lease finds Name held in shared mode, the driver
	// records the writer's intent (for the lease's TTL, renewed by each
	// attempt) and sets Result.Queued; shared acquisitions by other
	// owners then fail until the writer takes Name or its intent lapses.
	// Taking Name, and Release by the same owner, clear the intent.
	Waiting bool

	// Fence, when not 0, is the fencing token the core believes this
	// acquisition holds: Refresh must then extend the lease only if Owner
	// holds Name with exactly this token, and report ErrNotHeld
	// otherwise. One owner string can be granted a name twice within one
	// wait (a grant that lapsed unused, then a later one), so a check of
	// the owner alone would let a stale token pass for the current one.
	// The core sets it on every refresh of a lease it has handed out and
	// on the check that confirms a slow acquisition (see Result.Fence). A
	// driver whose owner strings can name only one grant (a queue node
	// created once per acquisition, as on ZooKeeper and etcd) meets this
	// by its owner check alone, and says so.
	Fence uint64

	// Delay, when not 0, is the lease's lock-delay (set with
	// dlock.WithLockDelay), only on a driver that implements LockDelayer:
	// Acquire and Refresh keep Name held for TTL+Delay from now, the
	// holder's lease for TTL of it and the delay after; Release frees
	// Name at once. Inspect reports a holder whose TTL has run out as
	// Holder.Delayed; a Result.Stamp's StampTTL counts the delay.
	Delay time.Duration

	// Takeover, when not empty, is a Result.Stamp that the core has seen
	// unchanged for that Result's StampTTL on its own monotonic clock.
	// Acquire may then take Name from the holders the stamp describes,
	// whatever the store's clock says of their leases, if and only if
	// their state is still exactly that stamp (a compare-and-set in the
	// same atomic step). See Result.Stamp.
	Takeover string
}

// Holder modes are compatible when both are locks (Limit 0, exclusive or
// shared) or both are semaphores of the same Limit. A lease whose mode
// is incompatible with a live holder of Name (or, on a Queuer, with an
// entry queued for it) gets an error wrapping ErrMode from Acquire and
// AcquireQueued, never a silent mix.
var ErrMode = errors.New("driver: name is held in an incompatible mode")

// Result is the outcome of one Acquire attempt.
type Result struct {
	// Acquired reports whether Owner now holds Name.
	Acquired bool
	// Fence is the fencing token of the acquisition when Acquired. It
	// strictly increases each time Name passes from free to held.
	Fence uint64
	// Remaining is, when not Acquired, the holder's remaining lease as the
	// server sees it, or 0 if unknown. The core never waits longer than
	// this before trying again.
	Remaining time.Duration
	// LeaseStart is, when Acquired by AcquireQueued, a local time (with
	// its monotonic reading) no later than the moment the server's lease
	// began, such as when the driver sent the request that made the
	// server grant it. The core measures the loss deadline from it. Zero
	// means the lease lasts TTL from when AcquireQueued returned.
	LeaseStart time.Time
	// Queued is set when the attempt left state in the store for this
	// owner without acquiring (a writer's intent, see Lease.Waiting). If
	// the acquisition then gives up, the core calls Release for the lease,
	// which must remove that state.
	Queued bool
	// Waited is set by AcquireQueued when this owner's entry had to wait
	// for entries ahead of it (a shared hold or permit that joins behind
	// holders it may share with does not wait): the lease was passed on
	// to it by releases. Ahead is how many entries, holders included, were
	// ahead of it when it joined (0 when it was first). Both are for hooks
	// and metrics only.
	Waited bool
	Ahead  int

	// Stamp, when not Acquired, is set by a driver whose leases are
	// measured by the store's wall clock to describe the exclusive holder
	// that keeps Name from Owner (or, where a driver offers it for them,
	// the holders): their state, which changes whenever one of them is
	// renewed, replaced or released (owner, token and expiry, say).
	// StampTTL is the longest lease among them. A driver sets it at least
	// when the store's clock says those leases ran out, but less than the
	// driver's clock bound ago: it does not take Name then, since a
	// forward step of that clock may have ended them early while their
	// holders still believe they hold. It may set it for live holders
	// too, which lets a waiter start counting earlier.
	//
	// The core (and a Queuer's own wait loop, through Observer) notes
	// when it first saw a Stamp, after the reply arrived; once it has
	// seen the same Stamp for StampTTL on its own monotonic clock, it
	// calls Acquire again with Lease.Takeover set to it, and the driver
	// takes Name if the holders' state is still that stamp, whatever the
	// store's clock says of their leases. By then each of those holders
	// has given its lease up, since a holder's Done closes 0.9×TTL after
	// sending the renewal that wrote the state the stamp shows, which was
	// before the taker first saw it. No wall clock is involved in that
	// rule. Remaining, with Stamp set for leases in doubt, is how long
	// until the store's clock says those leases ended more than the
	// clock bound ago (when the driver takes Name without a takeover).
	Stamp    string
	StampTTL time.Duration
}

// DefaultClockBound is the clock bound of drivers whose leases are
// measured by a store's wall clock, unless configured otherwise: a step
// of that clock, forward or back, by up to this much at any moment
// neither ends a lease under its holder (see Result.Stamp) nor makes a
// fencing token go down.
const DefaultClockBound = 10 * time.Second

// Driver is the set of atomic steps a backend provides. Each method is one
// atomic operation on the server that compares the owner.
//
// Implementations must be safe for concurrent use.
type Driver interface {
	// Acquire takes Name for Owner with lease TTL if Name is free or its
	// lease has expired (by more than the driver's clock bound on a store
	// whose leases run on its wall clock, unless Lease.Takeover allows
	// it: see Result.Stamp), or extends it if Owner already holds it (so
	// a retried Acquire whose reply was lost is idempotent, and returns
	// the token the store holds). If another
	// owner holds Name it returns a Result with Acquired false and no
	// error. For a MultiHolder, "free" means: for an exclusive lease, no
	// live holder; for a shared one, no live exclusive holder and no other
	// owner's live writer intent (or, on a Queuer, nobody queued ahead);
	// for a semaphore permit, fewer than Limit live holders.
	Acquire(ctx context.Context, l Lease) (Result, error)

	// Refresh extends every lease in ls that its owner still holds (with
	// the lease's Fence, when that is not 0) to its TTL from now. It
	// returns one error per lease, in order: nil when extended, an error
	// wrapping ErrNotHeld when the owner no longer holds it (or holds it
	// with another token), or another error when the outcome is unknown.
	// Drivers should batch the leases into as few round trips as they
	// can.
	Refresh(ctx context.Context, ls []Lease) []error

	// Release frees Name if Owner holds it, and wakes waiters where the
	// driver can. It returns an error wrapping ErrNotHeld if Owner did not
	// hold it.
	Release(ctx context.Context, l Lease) error

	// Close releases the driver's own resources (connections it opened,
	// goroutines it started). It does not close clients the user passed in.
	Close() error
}

// Notifier is implemented by drivers that can wake waiters when a name may
// have become free (Redis pub/sub, PostgreSQL LISTEN/NOTIFY, watches).
// Without it the core polls with a bounded backoff.
type Notifier interface {
	// Watch subscribes to wake-ups for name and returns once the
	// subscription is active on the server, so that a release after
	// Watch returns is not missed. The returned channel receives a value
	// (sends never block; it is buffered) whenever name may have been
	// freed; lost messages are allowed, the core falls back to the
	// holder's remaining lease. stop ends the subscription and must be
	// called exactly once; it may wait on the store (the core calls it
	// off the path of the Acquire call that leaves its wait).
	Watch(ctx context.Context, name string) (wake <-chan struct{}, stop func(), err error)
}

// Queuer is implemented by drivers whose store queues waiters fairly, in
// arrival order (ZooKeeper sequential nodes, etcd create revisions). The
// core's Acquire then calls AcquireQueued instead of retrying Acquire;
// TryAcquire still calls Acquire, which must not leave a queue entry
// behind when it fails.
type Queuer interface {
	// AcquireQueued joins the queue for l.Name and blocks until l.Owner
	// holds it, returning a Result with Acquired set, or until ctx ends;
	// then it removes its queue entry from the store before returning an
	// error wrapping ctx.Err(). On success the lease lasts at least l.TTL
	// from Result.LeaseStart, or, if that is zero, from the moment
	// AcquireQueued returns.
	AcquireQueued(ctx context.Context, l Lease) (Result, error)
}

// Loss reports leases a driver learned are lost without a refresh: a
// session that expired or was suspended, a key deleted under a watch.
type Loss struct {
	// Owner is the lost lease's owner, or "" when every lease the driver
	// holds is lost (a session-wide loss).
	Owner string
	// Err says what happened.
	Err error
}

// LossReporter is implemented by drivers that learn of lost leases as they
// happen, so the core can close Done without waiting for the next renewal.
type LossReporter interface {
	// Losses returns a channel that receives a Loss as soon as the driver
	// knows leases are lost. The driver closes it in Close. The core reads
	// it from one goroutine; the driver must not block forever sending
	// (drop or coalesce when nobody reads).
	Losses() <-chan Loss
}

// Holder describes a current holder of a name, as an Inspector sees it. A
// name held in shared mode or as a semaphore has one Holder per holder.
type Holder struct {
	Name      string
	Owner     string
	Fence     uint64
	Remaining time.Duration // lease left on the server, 0 if unknown
	Metadata  string
	Shared    bool // a shared (read) hold
	Limit     int  // a semaphore permit of Limit; 0 for a lock
	Delayed   bool // the holder's lease ran out and Name is in its lock-delay
}

// MultiHolder is implemented by drivers that keep Lease.Shared and
// Lease.Limit: shared holds, semaphore permits, and the rules above
// (ErrMode, writer intents or a FIFO queue that shared and exclusive
// waiters join alike). The core refuses dlock.Shared and dlock.WithLimit
// with ErrUnsupported on a driver without it.
//
// Fencing on such a driver: each new lease on Name, shared holds and
// permits included, gets a token above every token issued before for
// Name, so an exclusive holder's token is above every earlier reader's.
// Refresh and Release act on the one holder Owner names, whatever the
// mode; ForceRelease frees every holder of the name; Inspect reports
// each holder with its mode.
type MultiHolder interface {
	MultiHolder() bool
}

// ChangeNotifier is implemented by drivers whose store can tell when the
// holders of a name change in any way (taken, released, expired, handed
// on), for dlock's Locker.Observe. Without it Observe is woken by
// Notifier's wake-ups where there are some, and polls Inspect no slower
// than the Locker's longest retry interval.
type ChangeNotifier interface {
	// WatchChanges subscribes to changes of name's holders and returns
	// once the subscription is active. The channel receives a value
	// (sends never block; it is buffered) after each change; lost values
	// are allowed when one is already pending. stop ends the subscription
	// and must be called exactly once.
	WatchChanges(ctx context.Context, name string) (changed <-chan struct{}, stop func(), err error)
}

// Inspector is implemented by drivers that can report who holds names,
// for tools such as "dlock status".
type Inspector interface {
	// Inspect returns the holders of the given names that are held, or of
	// every held name when names is empty.
	Inspect(ctx context.Context, names []string) ([]Holder, error)
}

// WaiterCounter is implemented by drivers whose store can tell how many
// acquisitions wait for a name (the stores that queue waiters), for tools
// such as "dlock status --watch".
type WaiterCounter interface {
	// Waiters returns, for each of names in order, how many acquisitions
	// are queued for it without holding it.
	Waiters(ctx context.Context, names []string) ([]int, error)
}

// Describer is implemented by drivers that name their store for hooks and
// metrics ("redis", "postgres", "etcd"); without it the core uses the
// driver's package name.
type Describer interface {
	// Backend returns a short lowercase name of the store.
	Backend() string
}

// ForceReleaser is implemented by drivers that can free a name whatever
// its owner: the administrator's override.
type ForceReleaser interface {
	// ForceRelease frees name and wakes its waiters. It reports whether
	// name was held.
	ForceRelease(ctx context.Context, name string) (bool, error)
}

// Extender is implemented by drivers that can change the length of a held
// lease, for dlock's Lock.Extend.
type Extender interface {
	// Extend sets the lease of l, which l.Owner holds with token l.Fence,
	// to l.TTL from now, in one owner- and token-checked step, so that
	// later Refresh calls with l.TTL keep it at that length. l.TTL may be
	// shorter or longer than the TTL the lease had. It returns an error
	// wrapping ErrNotHeld when Owner no longer holds Name with that
	// token, and another error when the outcome is unknown (the lease
	// then has either length). The core never runs Extend and Refresh of
	// one lease at once.
	Extend(ctx context.Context, l Lease) error
}

// LockDelayer is implemented by drivers that keep Lease.Delay (see
// there), for dlock.WithLockDelay. The core refuses WithLockDelay with
// ErrUnsupported on a driver without it.
type LockDelayer interface {
	LockDelay() bool
}

// Resumer is implemented by drivers that can hand a held lease to another
// Locker, in this process or another, for dlock's Lock.Token and
// Locker.Resume.
type Resumer interface {
	// Scope names the namespace the driver keeps its leases in (a key
	// prefix and database, a table, a path): two drivers of one backend
	// with equal Scopes see the same leases, and a token taken under one
	// Scope is refused under another. It is put into tokens, which users
	// pass around and log: it must hold no secret (no password, no
	// credentials in a URL).
	Scope() string

	// Resume moves the lease from, which from.Owner holds with token
	// from.Fence, to the owner to.Owner, in one owner- and token-checked
	// step: from then on to.Owner holds it with the same token and a
	// lease of to.TTL from now (to.Metadata describes the new holder),
	// and from.Owner no longer holds it, so the old holder's next Refresh
	// or Release gets ErrNotHeld. to.Name, Shared and Limit equal from's.
	// It returns a Result with Acquired set and Fence equal to
	// from.Fence, or an error wrapping ErrNotHeld if from.Owner does not
	// hold from.Name with that token (released, expired, taken over, or
	// resumed already), and another error when the outcome is unknown.
	Resume(ctx context.Context, from, to Lease) (Result, error)
}

// ContextHonourer is implemented by drivers whose every call returns
// promptly once its context ends (as database/sql drivers and gRPC
// clients do). The core then runs their calls in the caller's goroutine
// instead of guarding each one with a goroutine of its own, which costs a
// scheduler hop per call.
type ContextHonourer interface {
	HonoursContext() bool
}

// QueueLeaveTimeout is how long the core waits, once the context of an
// AcquireQueued call has ended, for the call to take its entry out of the
// store's queue and return. A Queuer must return within it when the store
// answers; past it the core returns to its caller and releases whatever
// the call took once it completes.
const QueueLeaveTimeout = time.Second
