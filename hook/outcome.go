package hook

// AcquireOutcome is how an Acquire or TryAcquire call ended.
type AcquireOutcome int

const (
	// Acquired: the call returned a Lock.
	Acquired AcquireOutcome = iota
	// NotAcquired: a TryAcquire found the name held (dlock.ErrNotAcquired).
	NotAcquired
	// Canceled: the caller's context ended before the name was free.
	Canceled
	// AcquireFailed: any other error (the store, dlock.ErrClosed, a mode
	// clash).
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

// ReleaseOutcome is how freeing a lock on the store ended.
type ReleaseOutcome int

const (
	// Released: the store freed the name.
	Released ReleaseOutcome = iota
	// ReleaseNotHeld: the store no longer had the lease for its owner (it
	// expired or was taken over); the Release error wraps
	// dlock.ErrNotHeld.
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
