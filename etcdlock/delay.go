package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// LockDelay implements driver.LockDelayer. A key with a lock-delay is
// attached to a session lease of at least TTL+delay (see delaySeconds),
// so that a holder that dies keeps the name that long after its last
// keep-alive; and when its lease runs out in a live process (not
// renewed in time, or its session lost), the driver moves the key to a
// lease of its own of the delay, which nobody keeps alive, and marks it
// delayed. A release deletes the key at once.
func (d *etcdDriver) LockDelay() bool { return true }

var _ driver.LockDelayer = (*etcdDriver)(nil)

// sessionFor returns the session l's key joins (see session): for a
// lease with a lock-delay, the one of at least TTL+delay.
func (d *etcdDriver) sessionFor(ctx context.Context, l driver.Lease) (*session, error) {
	if l.Delay <= 0 {
		return d.session(ctx, l.TTL)
	}
	s, err := d.sessionOf(ctx, max(d.leaseSeconds(l.TTL), delaySeconds(l.TTL, l.Delay)))
	if err == nil {
		s.delays.Store(true)
	}
	return s, err
}

// delaySeconds returns the length of the session lease of a key with TTL
// ttl and lock-delay delay: 1.5×(ttl+delay)+2 s, rounded up. The session
// is kept alive every third of it, so when its holder stops (killed, or
// cut off from etcd at time P) its last keep-alive landed after
// P - lease/3, and etcd frees the name no earlier than P + 2/3 of the
// lease = P + ttl + delay + 4/3 s: after the holder's own loss deadline
// (at most 0.9×ttl after its last renewal, before P) plus the delay. And
// a live holder's lease never has less than delay left (2/3 of it minus
// a late keep-alive and etcd's whole seconds, rounded down), so Inspect
// can show a key Delayed once its lease has less than delay left. A dead
// holder's name is free between 2/3 of the lease and the lease after it
// died.
func delaySeconds(ttl, delay time.Duration) int64 {
	return ceilSeconds((ttl+delay)*3/2) + 2
}

// ceilSeconds returns t in whole seconds, rounded up.
func ceilSeconds(t time.Duration) int64 {
	return int64((t + time.Second - 1) / time.Second)
}

// value returns the value of l's key when it joins the queue: its
// metadata, or, with a lock-delay, a marked value that records the delay.
func (d *etcdDriver) value(l driver.Lease) string {
	if l.Delay <= 0 {
		return l.Metadata
	}
	return holdValue{owner: l.Owner, delay: l.Delay, metadata: l.Metadata}.encode()
}

// owns returns the compares that hold while e's key is e's: same create
// revision and, for an entry on a session, still attached to it (a key
// resumed elsewhere or moved to its lock-delay is not).
func owns(e entry) []clientv3.Cmp {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(e.key), "=", e.rev)}
	if e.sess != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(e.key), "=", e.sess.id))
	}
	return cmps
}

// deleteEntry deletes e's key if it is still e's (owns), and reports
// whether it did.
func (d *etcdDriver) deleteEntry(ctx context.Context, e entry) (bool, error) {
	resp, err := d.cli.Txn(ctx).If(owns(e)...).Then(clientv3.OpDelete(e.key)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// remove is the book's Remove, for a lease that ran out or was lost: it
// deletes e's key, or, for a lease with a lock-delay, starts the delay.
func (d *etcdDriver) remove(ctx context.Context, e entry) error {
	if e.owner != "" {
		return d.deleteIfOwner(ctx, e.key, e.owner)
	}
	if e.delay > 0 && e.sess != nil {
		return d.startDelay(ctx, e)
	}
	_, err := d.deleteEntry(ctx, e)
	return err
}

// startDelay moves e's key, if it is still e's, to a new lease of e's
// delay that nobody keeps alive, marked delayed: the name stays taken
// until etcd expires that lease. It costs a lease grant and a
// transaction.
func (d *etcdDriver) startDelay(ctx context.Context, e entry) error {
	g, err := d.cli.Grant(ctx, max(ceilSeconds(e.delay), 1))
	if err != nil {
		return err
	}
	v := decodeValue("", []byte(e.val))
	v.delayed = true
	resp, err := d.cli.Txn(ctx).If(owns(e)...).
		Then(clientv3.OpPut(e.key, v.encode(), clientv3.WithLease(g.ID))).Commit()
	if err != nil {
		return err // the put may have landed: g expires by itself
	}
	if !resp.Succeeded {
		d.revoke(g.ID) // gone, released or resumed meanwhile
	}
	return nil
}

// delayed reports whether the holder whose key has value v and whose
// lease has remaining time to live is in its lock-delay: marked so by
// startDelay, or its session lease (not kept alive: its holder died)
// has less than the delay left (see delaySeconds).
func delayed(v holdValue, remaining time.Duration) bool {
	return v.delayed || (v.delay > 0 && remaining < v.delay)
}
