package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// Refresh checks held children in batches: one multi request of check
// operations (version -1: the node exists, whatever its version) per
// batch. The server runs a multi as one transaction, through the leader,
// so a check that passes saw the node in the ensemble's committed state,
// not a follower's possibly older copy. When one check fails the whole
// multi fails: the checks before it report success (they passed at the
// transaction's point in the order), the failed one its error (ErrNoNode:
// that child is gone) and those after it an error saying they were not
// evaluated; Refresh then checks those again in another multi.

const (
	// maxCheckOps is the most check operations in one multi. The server
	// applies a multi as one transaction while other requests wait
	// behind it: 1,000 checks keep that to about a millisecond, and
	// 100,000 held locks still take only 100 requests, all pipelined.
	maxCheckOps = 1000

	// maxCheckBytes bounds a multi's check operations in bytes: a
	// quarter of ZooKeeper's default jute.maxbuffer (1 MB), which the
	// server applies to a request (it closes the connection of a client
	// that sends more, so the session's every lock) and to the
	// transaction it logs and sends to the followers. It matters only for
	// long names: a lock's path is tens of bytes, up to about 800.
	maxCheckBytes = 256 << 10

	// checkOpOverhead is what a check operation adds to a multi besides
	// its path's bytes: the operation's header (type, done flag and
	// error: 9 bytes), the path's length (4) and the version (4).
	checkOpOverhead = 17
)

// check is one lease of a Refresh whose child is to be checked, and the
// place of its outcome in Refresh's results.
type check struct {
	lease driver.Lease
	e     entry
	err   *error
}

// checkBatches splits cs into batches of at most maxCheckOps checks and
// maxCheckBytes bytes (at least one check each).
func checkBatches(cs []check) [][]check {
	var out [][]check
	from, size := 0, 0
	for i, c := range cs {
		n := checkOpOverhead + len(c.e.path)
		if i > from && (i-from == maxCheckOps || size+n > maxCheckBytes) {
			out = append(out, cs[from:i])
			from, size = i, 0
		}
		size += n
	}
	if from < len(cs) {
		out = append(out, cs[from:])
	}
	return out
}

// checkBatch decides every check of batch: one multi, then one more for
// the checks after each child found gone.
func (d *zkDriver) checkBatch(ctx context.Context, batch []check) {
	for len(batch) > 0 {
		batch = d.checkOnce(ctx, batch)
	}
}

// checkOnce sends one multi of batch's checks, records the outcome of
// each check the server evaluated, and returns the checks it did not
// evaluate (those after a child found gone), always fewer than batch.
func (d *zkDriver) checkOnce(ctx context.Context, batch []check) []check {
	ops := make([]any, len(batch))
	for i, c := range batch {
		ops[i] = &zk.CheckVersionRequest{Path: c.e.path, Version: -1}
	}
	start := time.Now()
	res, err := sessionlock.Call(ctx, func() ([]zk.MultiResponse, error) {
		return d.conn.Multi(ops...)
	})
	if len(res) != len(batch) {
		// No per-check results: the request failed as a whole (the
		// connection, the session, ctx), so every outcome is unknown.
		if err == nil {
			err = fmt.Errorf("multi of %d checks answered %d results", len(batch), len(res))
		}
		failAll(batch, err)
		return nil
	}
	for i, r := range res {
		c := batch[i]
		switch {
		case r.Error == nil:
			d.confirm(c, start)
		case errors.Is(r.Error, zk.ErrNoNode):
			d.leases.Drop(c.lease.Owner)
			*c.err = fmt.Errorf("zklock: refresh %q: child %s gone: %w", c.lease.Name, c.e.path, driver.ErrNotHeld)
			return batch[i+1:]
		default:
			// A failure that does not say the child is gone: the
			// checks from here on are undecided.
			failAll(batch[i:], r.Error)
			return nil
		}
	}
	return nil
}

// confirm extends c's lease from start, when its child was found.
func (d *zkDriver) confirm(c check, start time.Time) {
	if !d.leases.Extend(c.lease.Owner, c.e, start) {
		// Expired, lost or released while the request was in flight.
		*c.err = fmt.Errorf("zklock: refresh %q: %w", c.lease.Name, driver.ErrNotHeld)
	}
}

// failAll records err, an unknown outcome, for every check of cs.
func failAll(cs []check, err error) {
	for _, c := range cs {
		*c.err = fmt.Errorf("zklock: refresh %q: %w", c.lease.Name, err)
	}
}
