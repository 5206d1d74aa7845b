package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

func (d *zkDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		// Pipelined: the requests share the connection, one round trip
		// for the batch.
		wg.Go(func() { errs[i] = d.refresh(ctx, l) })
	}
	wg.Wait()
	return errs
}

// refresh checks that l's child still exists on its session and, if so,
// extends the lease's deadline from the request's send time.
func (d *zkDriver) refresh(ctx context.Context, l driver.Lease) error {
	e, fence, ok := d.leases.Held(l.Owner)
	if !ok {
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, driver.ErrNotHeld)
	}
	if l.Fence != 0 && l.Fence != fence {
		return fmt.Errorf("zklock: refresh %q: the owner holds it with token %d, not %d: %w", l.Name, fence, l.Fence, driver.ErrNotHeld)
	}
	start := time.Now()
	ok, st, err := d.exists(ctx, e.path)
	if err != nil {
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, err)
	}
	if !ok || st.EphemeralOwner != e.session {
		d.leases.Drop(l.Owner)
		return fmt.Errorf("zklock: refresh %q: child %s gone: %w", l.Name, e.path, driver.ErrNotHeld)
	}
	if !d.leases.Extend(l.Owner, e, start) {
		// Expired, lost or released while the request was in flight.
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
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
