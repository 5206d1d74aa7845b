package natslock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// Refresh implements driver.Driver: one read and one write per lease.
func (d *natsDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	for i, l := range ls {
		errs[i] = d.renew(ctx, "refresh", l)
	}
	return errs
}

// Extend implements driver.Extender: a renewal sets a lease to its TTL
// from now, whatever it was.
func (d *natsDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.renew(ctx, "extend", l)
}

// renew renews l's hold, if l.Owner holds l.Name (with l.Fence when set).
func (d *natsDriver) renew(ctx context.Context, op string, l driver.Lease) error {
	err := d.change(ctx, l.Name, func(st *state, _ uint64) (bool, error) {
		i, err := held(st, op, l)
		if err != nil {
			return false, err
		}
		st.Holders[i].renew(l)
		return true, nil
	}, func(uint64) {})
	return d.fail(op, l.Name, err)
}

// held returns the index of l's hold in st, or an error wrapping
// driver.ErrNotHeld.
func held(st *state, op string, l driver.Lease) (int, error) {
	i := st.find(l.Owner)
	if i < 0 {
		return -1, fmt.Errorf("natslock: %s %q: %w", op, l.Name, driver.ErrNotHeld)
	}
	if f := st.Holders[i].Fence; l.Fence != 0 && f != l.Fence {
		return -1, fmt.Errorf("natslock: %s %q: the owner holds it with token %d, not %d: %w", op, l.Name, f, l.Fence, driver.ErrNotHeld)
	}
	return i, nil
}

// Release implements driver.Driver. It also takes out l.Owner's writer's
// intent (see driver.Result.Queued).
func (d *natsDriver) Release(ctx context.Context, l driver.Lease) error {
	var found bool
	err := d.change(ctx, l.Name, func(st *state, _ uint64) (bool, error) {
		i := st.find(l.Owner)
		found = i >= 0
		intent := st.Intent != nil && st.Intent.Owner == l.Owner
		if intent {
			st.Intent = nil
		}
		if found {
			st.Holders = append(st.Holders[:i], st.Holders[i+1:]...)
		}
		return found || intent, nil
	}, func(uint64) {})
	if err == nil && !found {
		err = fmt.Errorf("natslock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	return d.fail("release", l.Name, err)
}

// Resume implements driver.Resumer: one compare-and-set that renames the
// hold's owner and keeps its token.
func (d *natsDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	err := d.change(ctx, from.Name, func(st *state, _ uint64) (bool, error) {
		i, err := held(st, "resume", from)
		if err != nil {
			return false, err
		}
		h := &st.Holders[i]
		h.Owner, h.Metadata = to.Owner, to.Metadata
		h.renew(to)
		return true, nil
	}, func(uint64) {})
	if err != nil {
		return driver.Result{}, d.fail("resume", from.Name, err)
	}
	return driver.Result{Acquired: true, Fence: from.Fence}, nil
}

// ForceRelease implements driver.ForceReleaser: it empties name's key.
func (d *natsDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	var was bool
	err := d.change(ctx, name, func(st *state, _ uint64) (bool, error) {
		was = len(st.Holders) > 0
		put := !st.empty()
		*st = state{}
		return put, nil
	}, func(uint64) {})
	return was, d.fail("force release", name, err)
}

// LockDelay implements driver.LockDelayer: a hold is kept for its TTL
// plus its delay after its last renewal, and Inspect marks the delay's
// part.
func (d *natsDriver) LockDelay() bool { return true }

// MultiHolder implements driver.MultiHolder: shared holds and semaphores.
func (d *natsDriver) MultiHolder() bool { return true }

// Backend implements driver.Describer.
func (d *natsDriver) Backend() string { return "nats" }

// Scope implements driver.Resumer: the bucket and the key prefix.
func (d *natsDriver) Scope() string { return "nats:" + d.kv.Bucket() + "/" + d.prefix }

// Close implements driver.Driver: it closes the connection Open made, and
// nothing else.
func (d *natsDriver) Close() error {
	if d.onClose != nil {
		d.onClose()
	}
	return nil
}
