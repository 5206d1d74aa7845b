package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// remove is the sessionlock.Leases' Remove: it deletes an expired or orphaned
// child, and fails only when a later attempt may succeed.
func (d *zkDriver) remove(ctx context.Context, e entry) error {
	if err := d.delete(ctx, e.path); transient(err) {
		return err
	}
	return nil
}

// Refresh checks that each lease's child still exists, with multi
// requests of check operations (see checks.go) pipelined on the session's
// connection, and extends the deadlines of those that do from the send
// time of the request that found them. A child of another session than
// the connection's is gone with that session.
func (d *zkDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	session := d.conn.SessionID()
	var cs []check
	for i, l := range ls {
		e, fence, ok := d.leases.Held(l.Owner)
		switch {
		case !ok:
			errs[i] = fmt.Errorf("zklock: refresh %q: %w", l.Name, driver.ErrNotHeld)
		case l.Fence != 0 && l.Fence != fence:
			errs[i] = fmt.Errorf("zklock: refresh %q: the owner holds it with token %d, not %d: %w", l.Name, fence, l.Fence, driver.ErrNotHeld)
		case e.session != session:
			d.leases.Drop(l.Owner)
			errs[i] = fmt.Errorf("zklock: refresh %q: child %s: %w (session 0x%x): %w", l.Name, e.path, errSessionChanged, e.session, driver.ErrNotHeld)
		default:
			cs = append(cs, check{lease: l, e: e, err: &errs[i]})
		}
	}
	var wg sync.WaitGroup
	for _, batch := range checkBatches(cs) {
		wg.Go(func() { d.checkBatch(ctx, batch) })
	}
	wg.Wait()
	return errs
}

// refresh is Refresh of one lease, for sessionlock.Acquire.
func (d *zkDriver) refresh(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

func (d *zkDriver) Release(ctx context.Context, l driver.Lease) error {
	if e, ok := d.leases.Drop(l.Owner); ok {
		ok, err := d.deleteOwned(ctx, e.path)
		switch {
		case err != nil:
			d.leases.Orphan(e)
			return fmt.Errorf("zklock: release %q: %w", l.Name, err)
		case !ok:
			return fmt.Errorf("zklock: release %q: %w", l.Name, driver.ErrNotHeld)
		}
		return nil
	}
	// Not held by this driver: an acquisition whose reply was lost, or a
	// lock already lost or expired. Delete whatever child the owner has.
	d.setUnsure(l.Owner, false)
	parent := d.parent(l.Name)
	kids, err := d.children(ctx, parent)
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zklock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("zklock: release %q: %w", l.Name, err)
	}
	for _, k := range kids {
		if isOwnedBy(k, l.Owner) {
			if err := d.delete(ctx, parent+"/"+k); err != nil {
				return fmt.Errorf("zklock: release %q: %w", l.Name, err)
			}
		}
	}
	return fmt.Errorf("zklock: release %q: %w", l.Name, driver.ErrNotHeld)
}
