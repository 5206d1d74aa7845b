package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
)

// maxTxnOps is the most operations Refresh puts in one transaction: the
// default of etcd's --max-txn-ops.
const maxTxnOps = 128

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
// that do from the transaction's send time.
func (d *etcdDriver) refresh(ctx context.Context, ls []driver.Lease, errs []error) {
	held := make([]entry, len(ls))
	var ops []clientv3.Op
	for i, l := range ls {
		e, fence, ok := d.leases.Held(l.Owner)
		switch {
		case !ok:
			errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
		case l.Fence != 0 && l.Fence != fence:
			errs[i] = fmt.Errorf("etcdlock: refresh %q: the owner holds it with token %d, not %d: %w", l.Name, fence, l.Fence, driver.ErrNotHeld)
		default:
			held[i] = e
			ops = append(ops, clientv3.OpGet(e.key))
		}
	}
	var resp *clientv3.TxnResponse
	start := time.Now()
	if len(ops) > 0 {
		var err error
		resp, err = d.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			for i, l := range ls {
				if held[i].key != "" {
					errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, err)
				}
			}
			return
		}
	}
	op := 0
	for i, l := range ls {
		e := held[i]
		if e.key == "" {
			continue // refused above
		}
		kvs := resp.Responses[op].GetResponseRange().GetKvs()
		op++
		switch {
		case len(kvs) == 0 || kvs[0].CreateRevision != e.rev || clientv3.LeaseID(kvs[0].Lease) != e.sess.id:
			d.leases.Drop(l.Owner)
			errs[i] = fmt.Errorf("etcdlock: refresh %q: key %q gone: %w", l.Name, e.key, driver.ErrNotHeld)
		case !d.leases.Extend(l.Owner, e, start):
			// Expired, lost or released while the request was in flight.
			errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.Name, driver.ErrNotHeld)
		}
	}
}

func (d *etcdDriver) Release(ctx context.Context, l driver.Lease) error {
	e, held := d.leases.Drop(l.Owner)
	if !held {
		// Not held by this driver: an acquisition whose reply was lost,
		// or a lock already lost or expired.
		return d.releaseUnheld(ctx, l)
	}
	ok, err := d.deleteEntry(ctx, e)
	switch {
	case err != nil:
		e.delay = 0 // a release: delete it, start no lock-delay
		d.leases.Orphan(e)
		return fmt.Errorf("etcdlock: release %q: %w", l.Name, err)
	case !ok:
		return fmt.Errorf("etcdlock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	return nil
}

// releaseUnheld deletes the owner's key if there is one that the owner
// still holds (not resumed by another owner, not in its lock-delay), and
// reports the lease not held. If that fails, the key is looked for again
// whenever the store answers: a put whose reply was lost may have
// attached it to a session that the driver keeps alive, and it would
// stay in the queue for as long as the session lives.
func (d *etcdDriver) releaseUnheld(ctx context.Context, l driver.Lease) error {
	key := d.key(l)
	err := d.deleteIfOwner(ctx, key, l.Owner)
	if err != nil {
		d.leases.Orphan(entry{key: key, owner: l.Owner})
	}
	if f := testhook.UnheldRelease.Load(); f != nil {
		(*f)(err)
	}
	if err != nil {
		return fmt.Errorf("etcdlock: release %q: %w", l.Name, err)
	}
	return fmt.Errorf("etcdlock: release %q: %w", l.Name, driver.ErrNotHeld)
}

// deleteIfOwner deletes key if owner still holds it (not resumed by
// another owner, not in its lock-delay).
func (d *etcdDriver) deleteIfOwner(ctx context.Context, key, owner string) error {
	resp, err := d.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		return err
	}
	kv := resp.Kvs[0]
	if v := decodeValue(owner, kv.Value); v.owner != owner || v.delayed {
		return nil
	}
	_, err = d.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}
