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

// lease is one held acquisition: its child znode and the driver's
// deadline, past which the driver deletes the child unless it was
// refreshed.
type lease struct {
	name    string
	path    string
	session int64 // the session that owns the child
	fence   uint64
	ttl     time.Duration

	// Guarded by zkDriver.mu.
	deadline time.Time
	timer    *time.Timer // runs expire at deadline
}

// hold records a child that now holds its lock and starts its deadline.
// The deadline is the TTL from now, later than the core's, which starts
// before the request; after a queued wait the core starts its clock when
// AcquireQueued returns, just after this, so the first deadline gets a
// twentieth of the TTL more.
func (d *zkDriver) hold(l driver.Lease, path string, st *zk.Stat) (driver.Result, error) {
	ls := &lease{name: l.Name, path: path, session: st.EphemeralOwner, fence: uint64(st.Czxid), ttl: l.TTL}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return driver.Result{}, errClosed
	}
	first := l.TTL + l.TTL/20
	ls.deadline = time.Now().Add(first)
	ls.timer = time.AfterFunc(first, func() { d.expire(l.Owner, ls) })
	d.leases[l.Owner] = ls
	d.wake()
	return driver.Result{Acquired: true, Fence: ls.fence}, nil
}

// expire deletes the child of a lease whose deadline passed without a
// refresh. It runs in the timer's goroutine, which exits after one bounded
// delete; Close waits for it.
func (d *zkDriver) expire(owner string, ls *lease) {
	d.mu.Lock()
	if d.closed || d.leases[owner] != ls || time.Now().Before(ls.deadline) {
		d.mu.Unlock() // closed, released, or refreshed (the timer was reset)
		return
	}
	delete(d.leases, owner)
	d.orphans[ls.path] = struct{}{}
	d.bg.Add(1)
	d.mu.Unlock()
	defer d.bg.Done()
	ctx, cancel := cleanupContext()
	defer cancel()
	d.reap(ctx, ls.path)
}

// reap deletes an orphaned child. If the connection failed it stays an
// orphan, for the session watcher to retry.
func (d *zkDriver) reap(ctx context.Context, path string) {
	err := d.delete(ctx, path)
	if transient(err) {
		return
	}
	d.mu.Lock()
	delete(d.orphans, path)
	d.mu.Unlock()
}

// transient reports whether err may go away on a new attempt.
func transient(err error) bool {
	return err != nil && (errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// drop forgets the lease of owner, if any, and returns it.
func (d *zkDriver) drop(owner string) *lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	ls := d.leases[owner]
	if ls != nil {
		ls.timer.Stop()
		delete(d.leases, owner)
	}
	return ls
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

func (d *zkDriver) refresh(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	ls := d.leases[l.Owner]
	d.mu.Unlock()
	if ls == nil {
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, driver.ErrNotHeld)
	}
	ok, st, err := d.exists(ctx, ls.path)
	if err != nil {
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, err)
	}
	if !ok || st.EphemeralOwner != ls.session {
		d.drop(l.Owner)
		return fmt.Errorf("zklock: refresh %q: child %s gone: %w", l.Name, ls.path, driver.ErrNotHeld)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.Owner] != ls {
		// Expired, lost or released while the request was in flight.
		return fmt.Errorf("zklock: refresh %q: %w", l.Name, driver.ErrNotHeld)
	}
	ls.deadline = time.Now().Add(ls.ttl)
	ls.timer.Reset(ls.ttl)
	return nil
}

func (d *zkDriver) Release(ctx context.Context, l driver.Lease) error {
	if ls := d.drop(l.Owner); ls != nil {
		ok, err := d.deleteOwned(ctx, ls.path)
		switch {
		case err != nil:
			d.orphan(ls.path)
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

// deleteOwned deletes the child at path and reports whether it existed.
func (d *zkDriver) deleteOwned(ctx context.Context, path string) (bool, error) {
	_, err := call(ctx, func() (struct{}, error) {
		return struct{}{}, d.conn.Delete(path, -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	return err == nil, err
}

// orphan records a child to delete once the connection allows.
func (d *zkDriver) orphan(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.orphans[path] = struct{}{}
		d.wake()
	}
}
