package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// maxTxnOps is the most operations Refresh puts in one transaction: the
// default of etcd's --max-txn-ops.
const maxTxnOps = 128

// lease is one held acquisition: its key and the driver's deadline, past
// which the driver deletes the key unless it was refreshed.
type lease struct {
	key  string
	rev  int64 // the key's create revision: the fencing token
	sess *session
	ttl  time.Duration

	// Guarded by etcdDriver.mu.
	deadline time.Time
	timer    *time.Timer // runs expire at deadline
}

// hold records a key that now holds its lock and starts its deadline.
// The deadline is the TTL from now, later than the core's, which starts
// before the request; after a queued wait the core starts its clock when
// AcquireQueued returns, just after this, so the first deadline gets a
// twentieth of the TTL more.
func (d *etcdDriver) hold(l driver.Lease, key string, rev int64, s *session) (driver.Result, error) {
	ls := &lease{key: key, rev: rev, sess: s, ttl: l.TTL}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return driver.Result{}, errClosed
	}
	if s.dead {
		return driver.Result{}, fmt.Errorf("etcdlock: acquire %q: %w", l.Name, errLeaseGone)
	}
	first := l.TTL + l.TTL/20
	ls.deadline = time.Now().Add(first)
	ls.timer = time.AfterFunc(first, func() { d.expire(l.Owner, ls) })
	d.leases[l.Owner] = ls
	return driver.Result{Acquired: true, Fence: uint64(rev)}, nil
}

// expire deletes the key of a lease whose deadline passed without a
// refresh. It runs in the timer's goroutine, which exits after one bounded
// delete; Close waits for it.
func (d *etcdDriver) expire(owner string, ls *lease) {
	d.mu.Lock()
	if d.closed || d.leases[owner] != ls || time.Now().Before(ls.deadline) {
		d.mu.Unlock() // closed, released, or refreshed (the timer was reset)
		return
	}
	delete(d.leases, owner)
	d.bg.Add(1)
	d.mu.Unlock()
	defer d.bg.Done()
	ctx, cancel := cleanupContext()
	defer cancel()
	if _, err := d.deleteKey(ctx, ls.key, ls.rev); err != nil {
		d.orphan(ls.key, ls.rev)
	}
}

// orphan records a key to delete later: the keep-alive loop retries.
func (d *etcdDriver) orphan(key string, rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed && rev != 0 {
		d.orphans[key] = rev
	}
}

// reapOrphans deletes orphaned keys, giving up at ctx's end.
func (d *etcdDriver) reapOrphans(ctx context.Context) {
	d.mu.Lock()
	keys := make(map[string]int64, len(d.orphans))
	for k, rev := range d.orphans {
		keys[k] = rev
	}
	d.mu.Unlock()
	for k, rev := range keys {
		if _, err := d.deleteKey(ctx, k, rev); err != nil {
			return
		}
		d.mu.Lock()
		delete(d.orphans, k)
		d.mu.Unlock()
	}
}

// deleteKey deletes key if its create revision is rev, and reports whether
// it did.
func (d *etcdDriver) deleteKey(ctx context.Context, key string, rev int64) (bool, error) {
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// drop forgets the lease of owner, if any, and returns it.
func (d *etcdDriver) drop(owner string) *lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	ls := d.leases[owner]
	if ls != nil {
		ls.timer.Stop()
		delete(d.leases, owner)
	}
	return ls
}

func (d *etcdDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	for start := 0; start < len(ls); start += maxTxnOps {
		end := min(start+maxTxnOps, len(ls))
		d.refresh(ctx, ls[start:end], errs[start:end])
	}
	return errs
}

// refresh checks, with one transaction, that each lease's key still exists
// with its create revision and session, and extends the deadlines of those
// that do.
func (d *etcdDriver) refresh(ctx context.Context, ls []driver.Lease, errs []error) {
	held := make([]*lease, len(ls))
	var ops []clientv3.Op
	d.mu.Lock()
	for i, l := range ls {
		held[i] = d.leases[l.Owner]
		if held[i] != nil {
			ops = append(ops, clientv3.OpGet(held[i].key))
		}
	}
	d.mu.Unlock()
	var resp *clientv3.TxnResponse
	if len(ops) > 0 {
		var err error
		resp, err = d.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			for i, l := range ls {
				errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, err)
			}
			return
		}
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	op := 0
	for i, l := range ls {
		h := held[i]
		if h == nil {
			errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
			continue
		}
		kvs := resp.Responses[op].GetResponseRange().GetKvs()
		op++
		switch {
		case d.leases[l.Owner] != h || h.sess.dead:
			// Expired, lost or released while the request was in flight.
			errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
		case len(kvs) == 0 || kvs[0].CreateRevision != h.rev || clientv3.LeaseID(kvs[0].Lease) != h.sess.id:
			h.timer.Stop()
			delete(d.leases, l.Owner)
			errs[i] = fmt.Errorf("etcdlock: refresh %q: key %q gone: %w", l.Name, h.key, driver.ErrNotHeld)
		default:
			h.deadline = now.Add(h.ttl)
			h.timer.Reset(h.ttl)
		}
	}
}

func (d *etcdDriver) Release(ctx context.Context, l driver.Lease) error {
	key, rev := d.key(l.Name, l.Owner), int64(0)
	ls := d.drop(l.Owner)
	if ls != nil {
		rev = ls.rev
	} else {
		// Not held by this driver: an acquisition whose reply was lost,
		// or a lock already lost or expired. Delete the owner's key if
		// there is one, and report it not held.
		resp, err := d.cli.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("etcdlock: release %q: %w", l.Name, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("etcdlock: release %q: %w", l.Name, driver.ErrNotHeld)
		}
		rev = resp.Kvs[0].CreateRevision
	}
	ok, err := d.deleteKey(ctx, key, rev)
	switch {
	case err != nil:
		d.orphan(key, rev)
		return fmt.Errorf("etcdlock: release %q: %w", l.Name, err)
	case !ok || ls == nil:
		return fmt.Errorf("etcdlock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
}
