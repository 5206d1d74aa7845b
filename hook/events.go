package hook

import "time"

// AcquireStart describes an acquisition that begins.
type AcquireStart struct {
	Backend string        // the store, as Locker.Backend reports it
	Name    string        // the name being acquired
	Wait    bool          // Acquire (true) or TryAcquire (false)
	Shared  bool          // a shared hold (see dlock.Shared)
	Limit   int           // a semaphore permit of Limit (see dlock.WithLimit); 0 for a lock
	TTL     time.Duration // the lease asked for
}

// AcquireDone describes an Acquire or TryAcquire call that returned.
type AcquireDone struct {
	AcquireStart
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

// Reentry describes an acquisition that re-entered a held lock.
type Reentry struct {
	Backend string
	Name    string
	Owner   string
	Fence   uint64 // the held lock's token, which the new handle shares
	Handles int    // open handles on the acquisition, the new one included
}

// Renewal describes one batch of automatic renewals: one driver call for
// every lease due at about the same time.
type Renewal struct {
	Backend  string
	Size     int           // leases in the batch
	Renewed  int           // leases extended
	NotHeld  int           // leases the store no longer had for their owner: lost
	Failed   int           // leases whose outcome is unknown (network, timeout): retried soon
	Duration time.Duration // the driver call's latency
	Err      error         // the first error of a failed lease, nil if none failed
}

// Loss describes a lost lock.
type Loss struct {
	Backend string
	Name    string
	Owner   string
	Fence   uint64
	Held    time.Duration // from the acquisition to the loss
	Reason  LossReason
	Cause   error // context.Cause of the lock's Context: wraps dlock.ErrLost
}

// Release describes a lock freed on the store.
type Release struct {
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
