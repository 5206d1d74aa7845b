package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

var _ driver.Extender = (*etcdDriver)(nil)

// Extend implements driver.Extender with one transaction: if l's key
// still has its create revision and is attached to the session the
// driver holds it on, it is put again, its value unchanged, attached to
// the session of the new TTL (granted first if the Locker has none: one
// more round trip), which keeps it from then on. The create revision,
// hence the fencing token, stays.
func (d *etcdDriver) Extend(ctx context.Context, l driver.Lease) error {
	e, fence, ok := d.leases.Held(l.Owner)
	if !ok || (l.Fence != 0 && l.Fence != fence) {
		return fmt.Errorf("etcdlock: extend %q: %w", l.Name, driver.ErrNotHeld)
	}
	s, err := d.sessionFor(ctx, l)
	if err != nil {
		return fmt.Errorf("etcdlock: extend %q: %w", l.Name, err)
	}
	start := time.Now()
	resp, err := d.cli.Txn(ctx).If(owns(e)...).
		Then(clientv3.OpPut(e.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(s.id))).Commit()
	d.joined(s)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			d.lose(s, errLeaseGone)
		}
		d.settleExtend(l, e, s, start)
		return fmt.Errorf("etcdlock: extend %q: %w", l.Name, err)
	}
	if !resp.Succeeded {
		d.leases.Drop(l.Owner)
		return fmt.Errorf("etcdlock: extend %q: key %q gone or moved: %w", l.Name, e.key, driver.ErrNotHeld)
	}
	moved := e
	moved.sess, moved.mod = s, resp.Header.Revision
	if _, err := d.leases.Hold(l.Owner, moved, fence, l.TTL, start); err != nil {
		d.leases.Drop(l.Owner)
		return fmt.Errorf("etcdlock: extend %q: %w: %w", l.Name, err, driver.ErrNotHeld)
	}
	return nil
}

// settleExtend learns, after an Extend whose outcome is unknown, which
// session e's key is attached to, with one bounded read, and books the
// lease on it (with l.TTL if it moved to s), so that the next refresh
// does not take a landed Extend for a loss. If the read fails the book
// stays as it is: a landed Extend is then found by that refresh as a key
// moved, and the lock lost (the safe side).
func (d *etcdDriver) settleExtend(l driver.Lease, e entry, s *session, start time.Time) {
	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	resp, err := d.cli.Get(ctx, e.key)
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	kv := resp.Kvs[0]
	if kv.CreateRevision != e.rev || clientv3.LeaseID(kv.Lease) != s.id || s == e.sess {
		return
	}
	cur, fence, ok := d.leases.Held(l.Owner)
	if !ok || cur != e {
		return
	}
	moved := e
	moved.sess, moved.mod = s, kv.ModRevision
	d.leases.Hold(l.Owner, moved, fence, l.TTL, start)
}
