package dlock

import (
	"context"
	"time"
)

// Hook observes a Locker's work: acquisitions, re-entries, renewals,
// losses and releases. Every field is optional; a nil field is never
// called. Add hooks with Locker.AddHook; a Locker without hooks pays one
// atomic load per call for them.
//
// Hooks are called synchronously, in the goroutine doing the work, after
// the Locker has released its internal lock: they must be quick (record,
// not block) and may call the Locker's read-only methods, but must not
// Acquire or Release. The slog, OpenTelemetry and Prometheus adapters are
// Hooks (see NewSlogHook and the modules under extra/).
//
// Calls that fail validation (a bad name, option or nil context) and
// calls on a closed Locker produce no events. Every acquisition that
// AcquireDone reports as acquired later ends in exactly one LossEvent or
// ReleaseEvent, so a hook can keep a count of held locks.
type Hook struct {
	// AcquireStart is called when an Acquire or TryAcquire call that does
	// not re-enter begins its work on the store. It returns the context
	// that the next hook's AcquireStart and every hook's AcquireDone for
	// this call receive, for example one carrying a span; nil keeps ctx.
	AcquireStart func(ctx context.Context, e AcquireStartEvent) context.Context

	// AcquireDone is called when that call returns, whatever the outcome.
	AcquireDone func(ctx context.Context, e AcquireDoneEvent)

	// Reentered is called when an Acquire or TryAcquire re-enters a lock
	// its context's owner holds (see Lock.Context).
	Reentered func(ctx context.Context, e ReentryEvent)

	// Renewed is called when a batch of automatic renewals completes.
	Renewed func(e RenewalEvent)

	// Lost is called after a held lock's Done closed because ownership
	// could no longer be guaranteed. ctx carries the values of the
	// context that acquired the lock.
	Lost func(ctx context.Context, e LossEvent)

	// Released is called when a lock is freed on the store: by the
	// Release of its last handle, or by Locker.Close. It is not called
	// for a lock that was lost first.
	Released func(ctx context.Context, e ReleaseEvent)
}

// AcquireStartEvent describes an acquisition that begins.
type AcquireStartEvent struct {
	Backend string        // the store, as Locker.Backend reports it
	Name    string        // the name being acquired
	Wait    bool          // Acquire (true) or TryAcquire (false)
	Shared  bool          // a shared hold (see Shared)
	Limit   int           // a semaphore permit of Limit (see WithLimit); 0 for a lock
	TTL     time.Duration // the lease asked for
}

// AcquireOutcome is how an Acquire or TryAcquire call ended.
type AcquireOutcome int

const (
	// Acquired: the call returned a Lock.
	Acquired AcquireOutcome = iota
	// NotAcquired: a TryAcquire found the name held (ErrNotAcquired).
	NotAcquired
	// Canceled: the caller's context ended before the name was free.
	Canceled
	// AcquireFailed: any other error (the store, ErrClosed, a mode clash).
	AcquireFailed
)

// String returns the outcome as a metric label: "acquired",
// "not_acquired", "canceled" or "error".
func (o AcquireOutcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case NotAcquired:
		return "not_acquired"
	case Canceled:
		return "canceled"
	default:
		return "error"
	}
}

// AcquireDoneEvent describes an Acquire or TryAcquire call that returned.
type AcquireDoneEvent struct {
	AcquireStartEvent
	Outcome  AcquireOutcome
	Err      error         // the call's error; nil when Acquired
	Owner    string        // the acquisition's owner string (see Lock.Owner)
	Fence    uint64        // the fencing token when Acquired
	Duration time.Duration // from the start of the call to its return
	Attempts int           // attempts on the store; a wait in the store's own queue counts as one

	// Contended reports that the name was held by another owner when the
	// call asked: it waited (or, for TryAcquire, failed). An acquisition
	// that is Contended and Acquired is a handoff from a previous holder.
	Contended bool

	// Ahead is how many entries were queued ahead of this call when it
	// joined the store's own queue (Redis, ZooKeeper, etcd), capped at
	// 32767, or -1 where the store does not queue or could not tell.
	Ahead int
}

// ReentryEvent describes an acquisition that re-entered a held lock.
type ReentryEvent struct {
	Backend string
	Name    string
	Owner   string
	Fence   uint64 // the held lock's token, which the new handle shares
	Handles int    // open handles on the acquisition, the new one included
}

// RenewalEvent describes one batch of automatic renewals: one driver call
// for every lease due at about the same time.
type RenewalEvent struct {
	Backend  string
	Size     int           // leases in the batch
	Renewed  int           // leases extended
	NotHeld  int           // leases the store no longer had for their owner: lost
	Failed   int           // leases whose outcome is unknown (network, timeout): retried soon
	Duration time.Duration // the driver call's latency
	Err      error         // the first error of a failed lease, nil if none failed
}

// LossReason is why a held lock was lost.
type LossReason int

const (
	// LossExpired: no renewal succeeded before the lease could run out
	// (the store was unreachable or slow, or the process was paused).
	LossExpired LossReason = iota
	// LossNotHeld: a renewal found the lease gone or held by another
	// owner (it expired on the server, or was force-released).
	LossNotHeld
	// LossReported: the store reported it (a session expired, a key was
	// deleted under a watch).
	LossReported
)

// String returns the reason as a metric label: "expired", "not_held" or
// "reported".
func (r LossReason) String() string {
	switch r {
	case LossExpired:
		return "expired"
	case LossNotHeld:
		return "not_held"
	default:
		return "reported"
	}
}

// LossEvent describes a lost lock.
type LossEvent struct {
	Backend string
	Name    string
	Owner   string
	Fence   uint64
	Held    time.Duration // from the acquisition to the loss
	Reason  LossReason
	Cause   error // context.Cause of the lock's Context: wraps ErrLost
}

// ReleaseOutcome is how freeing a lock on the store ended.
type ReleaseOutcome int

const (
	// Released: the store freed the name.
	Released ReleaseOutcome = iota
	// ReleaseNotHeld: the store no longer had the lease for its owner (it
	// expired or was taken over); the Release error wraps ErrNotHeld.
	ReleaseNotHeld
	// ReleaseFailed: the store step failed or its outcome is unknown; the
	// lease ends by its TTL.
	ReleaseFailed
)

// String returns the outcome as a metric label: "released", "not_held"
// or "error".
func (o ReleaseOutcome) String() string {
	switch o {
	case Released:
		return "released"
	case ReleaseNotHeld:
		return "not_held"
	default:
		return "error"
	}
}

// ReleaseEvent describes a lock freed on the store.
type ReleaseEvent struct {
	Backend  string
	Name     string
	Owner    string
	Fence    uint64
	Held     time.Duration // from the acquisition to the release
	Duration time.Duration // the release call's latency
	Closed   bool          // freed by Locker.Close rather than Lock.Release
	Outcome  ReleaseOutcome
	Err      error // the error of the store step, nil when Released
}
