package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/delaymeta"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// The issue-29 capabilities rlDriver provides.
var (
	_ driver.Extender    = (*rlDriver)(nil)
	_ driver.Resumer     = (*rlDriver)(nil)
	_ driver.LockDelayer = (*rlDriver)(nil)
)

// Extend implements driver.Extender. The refresh script sets each
// master's key to the TTL it is sent (PEXPIRE), whatever it was, so
// Extend is the refresh of one lease: one script call on every master in
// parallel (one round trip), held if a majority still held it. The core
// measures the new lease (0.9×TTL) from when it was sent, inside the new
// validity, TTL − elapsed − drift for the new TTL.
func (d *rlDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// Scope implements driver.Resumer: the key prefix (no address, no
// credentials).
func (d *rlDriver) Scope() string { return d.prefix }

// LockDelay implements driver.LockDelayer: each master's key lives
// TTL+Delay (PX) from each acquisition and refresh, while the validity
// arithmetic stays on the TTL; the delay rides in the metadata field for
// Inspect (see storedMeta). Release deletes the keys at once.
func (d *rlDriver) LockDelay() bool { return true }

// Resume implements driver.Resumer: lua/resume.lua on every master in
// parallel (one round trip) moves the key that an attempt of from.Owner
// holds with from.Fence to an attempt owner of to.Owner's. The hold is
// resumed if a majority moved it within its validity, to.TTL − elapsed −
// drift, counted from before the first request; this driver then keeps
// the token for to.Owner's refreshes, as an acquisition here would.
// Masters where the key had gone get it back at the first refresh.
//
// Otherwise it gives back what moved, on every master: the keys moved
// carry an owner no one else knows, so without the give-back they would
// keep the name from everyone until they expired. That is safe for the
// first holder too: on the masters where its key moved it has lost it
// either way, and where it did not, its refreshes go on as before.
func (d *rlDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	timeout := d.timeoutFor(to.TTL)
	owner := to.Owner
	to = d.attemptOwner(to)
	sent := time.Now()
	args := []any{from.Owner, strconv.FormatUint(from.Fence, 10), to.Owner, ms(to.TTL + to.Delay), storedMeta(to)}
	results := each(ctx, d, timeout, errNoAnswer, func(ctx context.Context, _ int, c redisconn.Conn) error {
		n, err := resumeScript.Exec(ctx, c, []string{d.lockKey(from.Name)}, args...).Int64()
		if err == nil && n != 1 {
			err = driver.ErrNotHeld
		}
		return err
	}, nil, nil) // every answer: a move left to finish later would not be given back
	moved, unknown := 0, 0
	var firstErr error
	for _, err := range results {
		switch {
		case err == nil:
			moved++
		case !errors.Is(err, driver.ErrNotHeld):
			unknown++
			firstErr = cmpErr(firstErr, err)
		}
	}
	validity := to.TTL - time.Since(sent) - d.driftFor(to.TTL)
	if moved >= d.quorum && validity > 0 {
		d.remember(owner, held{token: from.Fence, key: to.Owner})
		return driver.Result{Acquired: true, Fence: from.Fence, LeaseStart: sent}, nil
	}
	if moved > 0 {
		d.giveBack(ctx, to, "r", nil)
	}
	switch {
	case moved >= d.quorum:
		return driver.Result{}, fmt.Errorf("redlock: resume %q: moved on %d of %d masters after its validity ran out; given back", from.Name, moved, len(d.masters))
	case moved+unknown >= d.quorum:
		return driver.Result{}, fmt.Errorf("redlock: resume %q: moved on %d of %d masters and %d did not answer, want %d; given back: %w", from.Name, moved, len(d.masters), unknown, d.quorum, firstErr)
	}
	return driver.Result{}, fmt.Errorf("redlock: resume %q: held with token %d on %d of %d masters, want %d: %w", from.Name, from.Fence, moved, len(d.masters), d.quorum, driver.ErrNotHeld)
}

// cmpErr returns first if set, else err.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// storedMeta is the metadata field the scripts store for l: the delay
// in front of the metadata when l has one (see package delaymeta).
func storedMeta(l driver.Lease) string { return delaymeta.Encode(l.Metadata, l.Delay) }
