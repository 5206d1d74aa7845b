package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// remove is the sessionlock.Leases' Remove: it deletes an expired or orphaned
// child, and fails only when a later attempt may succeed.
func (d *zkDriver) remove(ctx context.Context, e entry) error {
	if err := d.removeEntry(ctx, e); transient(err) {
		return err
	}
	return nil
}

// removeEntry deletes e's child: the one at e.path, or, for an entry
// with an owner, whichever children of the parent at e.path the owner
// has.
func (d *zkDriver) removeEntry(ctx context.Context, e entry) error {
	if e.owner == "" {
		return d.delete(ctx, e.path)
	}
	_, err := d.deleteOwnerChildren(ctx, e.path, e.owner)
	return err
}

// deleteOwnerChildren deletes owner's children under parent (a missing
// parent has none) and reports whether it found any.
func (d *zkDriver) deleteOwnerChildren(ctx context.Context, parent, owner string) (bool, error) {
	kids, err := d.children(ctx, parent)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	found := false
	for _, k := range kids {
		if isOwnedBy(k, owner) {
			found = true
			if err := d.delete(ctx, parent+"/"+k); err != nil {
				return found, err
			}
		}
	}
	return found, nil
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
	// If a create of the owner's may have been applied unseen and this
	// fails, the child is looked for again whenever the connection is
	// up: its session, kept alive by the connection, would keep it in
	// the queue for good.
	unsure := d.takeUnsure(l.Owner)
	parent := d.parent(l.Name)
	_, err := d.deleteOwnerChildren(ctx, parent, l.Owner)
	if err != nil && unsure {
		d.leases.Orphan(entry{path: parent, owner: l.Owner})
	}
	if f := testhook.UnheldRelease.Load(); f != nil {
		(*f)(unsure, err)
	}
	if err != nil {
		return fmt.Errorf("zklock: release %q: %w", l.Name, err)
	}
	return fmt.Errorf("zklock: release %q: %w", l.Name, driver.ErrNotHeld)
}
