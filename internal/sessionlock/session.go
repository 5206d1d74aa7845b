// Package sessionlock is the store-independent half of the drivers whose
// locks are entries of a fair queue that live on a client session:
// zklock (ephemeral sequential znodes on a ZooKeeper session) and
// etcdlock (keys attached to an etcd lease).
//
// Such a store knows nothing of a lock's TTL: an entry lives as long as
// its session. The driver keeps each lease's deadline itself and removes
// the entry when the deadline passes without a refresh. Leases is that
// book: one deadline per held lease, measured from the send time of the
// step that last confirmed the lease on the server, the entries to remove
// once the store allows (orphans), and the losses to report to the core.
//
// Acquire and AcquireQueued are the two ways to take a lock in such a
// queue, written once over the small Queue interface a driver implements:
// join the queue, read its position, wait for the predecessors, leave.
// One queue serves exclusive and shared holds and semaphore permits:
// Mode, Place and Holding are its rule.
//
// Call guards a client call that takes no context.
package sessionlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CleanupTimeout bounds what is done with a context of its own after the
// caller's context ended or at Close: removing a queue entry, an expired
// lease's entry, an orphan.
const CleanupTimeout = 5 * time.Second

// CleanupContext returns a context that ends after CleanupTimeout.
func CleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CleanupTimeout)
}

// RetryDelay is how long a queued waiter pauses after a transient error
// (the connection is down, the session is being replaced) before trying
// again.
const RetryDelay = 100 * time.Millisecond

// ErrGone means a queue entry is no longer in its queue: its session was
// lost, or it was deleted behind the driver's back. A queued waiter joins
// the queue again.
var ErrGone = errors.New("queued entry gone")

// Call runs f, a client call that takes no context, and returns its
// result, or ctx's error as soon as ctx ends. A call abandoned this way
// finishes in its goroutine, which exits when f returns: f must be bounded
// by the client (a request timeout, or failing when the connection
// closes).
func Call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() { // exits when f returns; see above
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// ConnectError is the error of an Open that could not reach its store:
// it names the store's hosts and wraps err, and ctx.Err() too if ctx
// ended (the client's error does not always carry it). what prefixes
// the message: the backend's package name.
func ConnectError(ctx context.Context, what string, hosts []string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", err, cerr)
	}
	return fmt.Errorf("%s: cannot connect to %s: %w", what, strings.Join(hosts, ","), err)
}
