package redislock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock/driver"
)

// The issue-29 capabilities redisDriver provides (see Extend, Resume and
// LockDelay).
var (
	_ driver.Extender    = (*redisDriver)(nil)
	_ driver.Resumer     = (*redisDriver)(nil)
	_ driver.LockDelayer = (*redisDriver)(nil)
)

// Extend implements driver.Extender. The refresh script sets a lease to
// the TTL it is sent (SET PX for an exclusive holder, the holder's expiry
// in the hash for a shared hold or permit), whatever it was, so Extend is
// the refresh of one lease: one script call, one round trip (followed by
// WAIT when WaitReplicas is set).
func (d *redisDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// Scope implements driver.Resumer: the key prefix, and the database of a
// single-node or Sentinel client (a Cluster has only database 0). It
// holds no address and no credentials.
func (d *redisDriver) Scope() string {
	if db := d.c.DB(); db >= 0 {
		return d.prefix + " db" + strconv.Itoa(db)
	}
	return d.prefix
}

// Resume implements driver.Resumer with one script call (lua/resume.lua,
// one round trip, followed by WAIT when WaitReplicas is set) that checks
// from's owner and fence and renames the hold in place: the same fence,
// the same mode, to's lease and metadata.
func (d *redisDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	call := d.batch.run(&scriptCall{ctx: ctx, script: resumeScript, keys: []string{Key(d.prefix, from.Name)}, wait: true, ttl: to.TTL,
		args: []any{from.Owner, strconv.FormatUint(from.Fence, 10), to.Owner, ms(to.TTL + to.Delay), storedMeta(to), modeArg(to), ms(d.bound)}})
	n, err := call.reply.Int64()
	switch {
	case err != nil:
		return driver.Result{}, fmt.Errorf("redislock: resume %q: %w", from.Name, err)
	case n == 0:
		return driver.Result{}, fmt.Errorf("redislock: resume %q: %w", from.Name, driver.ErrNotHeld)
	case n < 0:
		return driver.Result{}, fmt.Errorf("redislock: resume %q as %s: held in another mode: %w", from.Name, modeName(modeArg(to)), driver.ErrNotHeld)
	}
	if d.wait != nil {
		// Moved on the master, perhaps not on the replicas: whether a
		// failover would keep the move is unknown.
		if err := d.wait.check(call.acks); err != nil {
			return driver.Result{}, fmt.Errorf("redislock: resume %q: outcome unknown: %w", from.Name, err)
		}
	}
	return driver.Result{Acquired: true, Fence: from.Fence}, nil
}
