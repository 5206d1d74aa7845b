package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// wakeups counts the delete events that woke waiters, for tests.
var wakeups atomic.Int64

func (d *etcdDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	refresh := func(ctx context.Context, l driver.Lease) error { return d.Refresh(ctx, []driver.Lease{l})[0] }
	res, err := sessionlock.Acquire(ctx, d.leases, refresh, queue{d}, l)
	return res, err
}

func (d *etcdDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	res, err := sessionlock.AcquireQueued(ctx, d.leases, queue{d}, l)
	return res, err
}

// queue is the lock's queue of keys for sessionlock.Acquire and
// AcquireQueued: an entry is a key with its create revision and session,
// and so is each of the predecessors a waiter waits for.
type queue struct{ d *etcdDriver }

// Classify is the driver's: sessionlock retries ErrorTransient.
func (q queue) Classify(err error) driver.ErrorKind { return q.d.Classify(err) }

// Join gets the live session for l's TTL (granting one if needed), puts
// the key and reads the keys ahead of it, in one transaction.
func (q queue) Join(ctx context.Context, l driver.Lease) (entry, driver.Result, []entry, error) {
	s, err := q.d.sessionFor(ctx, l)
	if err != nil {
		return entry{}, driver.Result{}, nil, err
	}
	key := q.d.key(l)
	start := time.Now()
	j, err := q.d.enqueue(ctx, Key(q.d.prefix, l.Name), key, q.d.value(l), sessionlock.ModeOf(l), s)
	q.d.joined(s)
	if err != nil {
		return entry{key: key, sess: s}, driver.Result{}, nil, err // the put may have been applied
	}
	e := entry{key: key, rev: j.rev, sess: s, ahead: j.ahead}
	if l.Delay > 0 {
		e.delay, e.val = l.Delay, q.d.value(l)
	}
	if !j.read {
		// Found from an earlier attempt: read its place now.
		res, preds, err := q.d.position(ctx, l, e)
		return e, res, preds, err
	}
	res, preds, err := q.d.place(l, e, j.before, start)
	return e, res, preds, err
}

func (q queue) Position(ctx context.Context, l driver.Lease, e entry) (driver.Result, []entry, error) {
	return q.d.position(ctx, l, e)
}

// Wait waits for the deletion of any of preds.
func (q queue) Wait(ctx context.Context, preds []entry) error {
	if len(preds) == 1 {
		return q.d.waitDelete(ctx, preds[0].key, preds[0].rev, preds[0].sess)
	}
	// A permit's: the watches share the client's watch stream.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, len(preds))
	for _, p := range preds {
		go func() { done <- q.d.waitDelete(ctx, p.key, p.rev, p.sess) }() // exits when Wait returns at the latest
	}
	return <-done
}

func (q queue) Leave(e entry) {
	if e.key != "" {
		q.d.leave(e.key, e.rev)
	}
}

// joined is what enqueue learned: the key's create revision, how many
// keys under the name's prefix were ahead of it (-1 unknown), and, if
// read is set, the last of them (sessionlock.Mode.Ahead; oldest first).
type joined struct {
	rev    int64
	ahead  int
	read   bool
	before []*mvccpb.KeyValue
}

// enqueue puts key (its value: the holder's metadata), attached to s's
// lease, unless it exists already (a retry whose reply was lost), and
// returns its create revision. In the same transaction, before the put,
// it reads the keys under the name's prefix that the rule needs for an
// entry of mode m (every key there is ahead of the new one) and their
// count. For a key that existed already it reads nothing. It does not
// give up when ctx ends, only after sessionlock.CleanupTimeout: the
// caller must learn the key's revision to delete it, or a create landing
// after its clean-up would queue a key that nobody deletes until the
// session ends.
func (d *etcdDriver) enqueue(ctx context.Context, prefix, key, metadata string, m sessionlock.Mode, s *session) (joined, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionlock.CleanupTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		resp, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpGet(prefix, d.lastBefore(m, 0)...),
				clientv3.OpPut(key, metadata, clientv3.WithLease(s.id))).
			Else(clientv3.OpGet(key)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			d.lose(s, errLeaseGone)
			return joined{}, errLeaseGone
		}
		if err != nil {
			return joined{}, err
		}
		if resp.Succeeded {
			// The range's count is of every key in it, whatever the limit.
			r := resp.Responses[0].GetResponseRange()
			kvs := r.GetKvs()
			slices.Reverse(kvs) // oldest first
			return joined{rev: resp.Header.Revision, ahead: int(r.GetCount()), read: true, before: kvs}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == s.id {
			return joined{rev: kvs[0].CreateRevision, ahead: -1}, nil
		}
		if attempt == 3 {
			return joined{}, fmt.Errorf("key %q keeps existing on another lease", key)
		}
		if len(kvs) == 1 {
			// Left from a session this driver lost: replace it.
			if _, err := d.deleteKey(ctx, key, kvs[0].CreateRevision); err != nil {
				return joined{}, err
			}
		}
	}
}

// lastBefore returns the options of a read of the keys under a name's
// prefix that the rule needs for an entry of mode m created at revision
// rev (0: one not created yet, so every key is before it): the last
// m.Ahead() of those created before it (all of them if Ahead is 0),
// newest first.
func (d *etcdDriver) lastBefore(m sessionlock.Mode, rev int64) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	if rev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(rev-1))
	}
	if n := m.Ahead(); n > 0 {
		opts = append(opts, clientv3.WithLimit(int64(n)))
	}
	return opts
}

// position reads, with one transaction, e's key and the keys queued just
// before it that the rule needs (sessionlock.Mode.Ahead: the one before
// an exclusive key, the n before a permit's, all of them before a shared
// one). If e holds by sessionlock.Place and is still attached to its
// session, which is still alive, it takes the lock. Otherwise it returns
// the predecessors whose deletion may let it in. Either way the Result's
// Ahead is e's count from Join (this read sees only the keys the rule
// needs). It returns
// sessionlock.ErrGone if e or its session is gone, and an error wrapping
// driver.ErrMode if a key of another kind is among those before it.
func (d *etcdDriver) position(ctx context.Context, l driver.Lease, e entry) (driver.Result, []entry, error) {
	if e.sess.dead.Load() {
		return driver.Result{}, nil, sessionlock.ErrGone // queue again on a new session
	}
	start := time.Now()
	resp, err := d.cli.Txn(ctx).Then(
		clientv3.OpGet(e.key),
		clientv3.OpGet(Key(d.prefix, l.Name), d.lastBefore(sessionlock.ModeOf(l), e.rev)...),
	).Commit()
	if err != nil {
		return driver.Result{}, nil, err
	}
	own := resp.Responses[0].GetResponseRange().GetKvs()
	if len(own) == 0 || own[0].CreateRevision != e.rev || clientv3.LeaseID(own[0].Lease) != e.sess.id {
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	kvs := resp.Responses[1].GetResponseRange().GetKvs()
	slices.Reverse(kvs) // oldest first
	return d.place(l, e, kvs, start)
}

// place applies sessionlock.Place to e, given before, the keys just
// before it that the rule needs (oldest first), read by a request sent at
// start that also found e in place. If e holds and its session is alive,
// it takes the lock; otherwise it returns the predecessors to wait for.
// The Result's Ahead is e's count from Join.
func (d *etcdDriver) place(l driver.Lease, e entry, before []*mvccpb.KeyValue, start time.Time) (driver.Result, []entry, error) {
	ahead := make([]sessionlock.Mode, len(before))
	for i, kv := range before {
		ahead[i], _ = d.parseKey(kv.Key)
	}
	held, wait, err := sessionlock.Place(ahead, sessionlock.ModeOf(l))
	if err != nil {
		return driver.Result{}, nil, err
	}
	if !held {
		preds := make([]entry, len(wait))
		for i, w := range wait {
			preds[i] = entry{key: string(before[w].Key), rev: before[w].CreateRevision, sess: e.sess}
		}
		return driver.Result{Ahead: e.ahead}, preds, nil
	}
	if !d.alive(e.sess) {
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	res, err := d.leases.Hold(l.Owner, e, uint64(e.rev), l.TTL, start)
	if err != nil && !errors.Is(err, dlock.ErrClosed) {
		err = sessionlock.ErrGone
	}
	res.Ahead = e.ahead
	return res, nil, err
}

// waitDelete waits until the key pred created at revision predRev is
// deleted, s is lost, or ctx ends. It returns an error only when ctx ends.
//
// The watch starts at the store's current revision rather than at the
// revision of the caller's read: etcd serves a watch that starts in the
// past from its catch-up loop, which runs every 100 ms, and would delay
// the wake-up of a waiter whose predecessor goes at once. So once the
// watch is set, pred is read again if the store moved since.
func (d *etcdDriver) waitDelete(ctx context.Context, pred string, predRev int64, s *session) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := d.cli.Watch(wctx, pred, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	created := false
	for {
		select {
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				return ctx.Err() // cancelled, or compacted: read the queue again
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					wakeups.Add(1)
					return nil
				}
			}
			if !created && resp.Created {
				created = true
				g, err := d.cli.Get(ctx, pred)
				if err != nil || len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != predRev {
					return ctx.Err() // gone already (or unknown): read the queue again
				}
			}
		case <-s.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leave deletes a queued key (rev 0 means unknown: looked up) with a fresh
// bounded context, the caller's may have ended. On failure the key becomes
// an orphan, deleted later or with its session.
func (d *etcdDriver) leave(key string, rev int64) {
	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	if rev == 0 {
		resp, err := d.cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return
		}
		rev = resp.Kvs[0].CreateRevision
	}
	if _, err := d.deleteKey(ctx, key, rev); err != nil {
		d.leases.Orphan(entry{key: key, rev: rev})
	}
}
