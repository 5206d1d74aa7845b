package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

var _ driver.Resumer = (*etcdDriver)(nil)

// Scope implements driver.Resumer: the key prefix.
func (d *etcdDriver) Scope() string { return d.prefix }

// Resume implements driver.Resumer. The key stays (its create revision is
// the fencing token); its value, marked with the new owner (see
// holdValue), and its lease, the resuming Locker's session of to.TTL, are
// put in one transaction that compares what makes from.Owner its holder:
//
//   - a key never put again since from.Owner created it (version 1,
//     the common case) is compared by name, create revision and version:
//     one round trip;
//   - otherwise (resumed or extended before, so named after an earlier
//     owner), that transaction reads the name's key with the create
//     revision from.Fence, and a second one puts it if its value names
//     from.Owner, compared by mod revision: two round trips.
//
// Either way a grant comes first if the Locker has no session of that
// TTL yet. The first holder's driver finds the key on another lease at
// its next refresh (ErrNotHeld), and its release or expiry deletes
// nothing.
func (d *etcdDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	if from.Fence == 0 || from.Fence > math.MaxInt64 {
		return driver.Result{}, fmt.Errorf("etcdlock: resume %q: %w", from.Name, driver.ErrNotHeld)
	}
	s, err := d.sessionFor(ctx, to)
	if err != nil {
		return driver.Result{}, fmt.Errorf("etcdlock: resume %q: %w", from.Name, err)
	}
	rev := int64(from.Fence)
	val := holdValue{owner: to.Owner, delay: to.Delay, metadata: to.Metadata}.encode()
	key, start := d.key(from), time.Now()
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev), clientv3.Compare(clientv3.Version(key), "=", 1)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(s.id))).
		Else(d.byFence(from.Name, rev)).Commit()
	for attempt := 1; err == nil && !resp.Succeeded; attempt++ {
		kv := d.heldBy(resp, from)
		if kv == nil {
			d.joined(s)
			return driver.Result{}, fmt.Errorf("etcdlock: resume %q: %w", from.Name, driver.ErrNotHeld)
		}
		if attempt == 3 {
			d.joined(s)
			return driver.Result{}, fmt.Errorf("etcdlock: resume %q: key %q keeps changing", from.Name, kv.Key)
		}
		key, start = string(kv.Key), time.Now()
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, val, clientv3.WithLease(s.id))).
			Else(d.byFence(from.Name, rev)).Commit()
	}
	d.joined(s)
	e := entry{key: key, rev: rev, sess: s}
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			d.lose(s, errLeaseGone)
		}
		d.leases.Orphan(e) // deleted if the put landed on s
		return driver.Result{}, fmt.Errorf("etcdlock: resume %q: %w", from.Name, err)
	}
	if old, _, ok := d.leases.Held(from.Owner); ok && old.key == key {
		d.leases.Drop(from.Owner) // resumed from this Locker
	}
	e.mod = resp.Header.Revision
	if to.Delay > 0 {
		e.delay, e.val = to.Delay, val
	}
	res, err := d.leases.Hold(to.Owner, e, from.Fence, to.TTL, start)
	if err != nil {
		d.leases.Orphan(entry{key: key, rev: rev, sess: s})
		return driver.Result{}, fmt.Errorf("etcdlock: resume %q: %w", from.Name, err)
	}
	return res, nil
}

// byFence reads the key of name created at revision rev (at most one).
func (d *etcdDriver) byFence(name string, rev int64) clientv3.Op {
	return clientv3.OpGet(Key(d.prefix, name), clientv3.WithPrefix(),
		clientv3.WithMinCreateRev(rev), clientv3.WithMaxCreateRev(rev))
}

// heldBy returns the key that the failed transaction resp read with
// byFence if from.Owner holds it in from's mode (not in its lock-delay),
// or nil.
func (d *etcdDriver) heldBy(resp *clientv3.TxnResponse, from driver.Lease) *mvccpb.KeyValue {
	if len(resp.Responses) != 1 {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil
	}
	m, nameOwner := d.parseKey(kvs[0].Key)
	v := decodeValue(nameOwner, kvs[0].Value)
	if m.Tag() != sessionlock.ModeOf(from).Tag() || v.owner != from.Owner || v.delayed {
		return nil
	}
	return kvs[0]
}
