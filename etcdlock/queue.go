package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/pause"
)

// retryDelay is how long a waiter pauses after a transient error before
// trying again.
const retryDelay = 100 * time.Millisecond

// wakeups counts the delete events that woke waiters, for tests.
var wakeups atomic.Int64

// errGone means the acquisition's key is no longer in the queue (its
// session was lost, or it was deleted behind the driver's back).
var errGone = errors.New("etcdlock: queued key gone")

func (d *etcdDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	d.mu.Lock()
	held, closed := d.leases[l.Owner], d.closed
	d.mu.Unlock()
	if closed {
		return driver.Result{}, errClosed
	}
	if held != nil {
		// Held already: a retry whose first reply was lost.
		err := d.Refresh(ctx, []driver.Lease{l})[0]
		if err == nil {
			return driver.Result{Acquired: true, Fence: uint64(held.rev)}, nil
		}
		if !errors.Is(err, driver.ErrNotHeld) {
			return driver.Result{}, err
		}
	}
	s, err := d.session(ctx)
	if err != nil {
		return driver.Result{}, fmt.Errorf("etcdlock: acquire %q: %w", l.Name, err)
	}
	key := d.key(l.Name, l.Owner)
	rev, err := d.enqueue(ctx, key, l.Metadata, s)
	if err != nil {
		d.leave(key, 0)
		return driver.Result{}, fmt.Errorf("etcdlock: acquire %q: %w", l.Name, err)
	}
	res, _, _, err := d.position(ctx, l, key, rev, s)
	if err == nil && res.Acquired {
		return res, nil
	}
	d.leave(key, rev) // not first: leave no queue entry behind
	if err != nil && !errors.Is(err, errGone) {
		return driver.Result{}, fmt.Errorf("etcdlock: acquire %q: %w", l.Name, err)
	}
	return driver.Result{}, nil
}

func (d *etcdDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	key := d.key(l.Name, l.Owner)
	var (
		rev int64
		s   *session
	)
	fail := func(err error) (driver.Result, error) {
		d.leave(key, rev)
		return driver.Result{}, queuedError(l, err)
	}
	for {
		if rev == 0 {
			var err error
			if s, err = d.session(ctx); err != nil {
				if d.transient(ctx, err) && pause.For(ctx, retryDelay) {
					continue
				}
				return driver.Result{}, queuedError(l, err)
			}
			if rev, err = d.enqueue(ctx, key, l.Metadata, s); err != nil {
				if d.transient(ctx, err) && pause.For(ctx, retryDelay) {
					continue
				}
				return fail(err)
			}
		}
		res, pred, predRev, err := d.position(ctx, l, key, rev, s)
		switch {
		case errors.Is(err, errGone):
			rev = 0 // queue again, on a new session if this one was lost
			continue
		case err != nil:
			if d.transient(ctx, err) && pause.For(ctx, retryDelay) {
				continue
			}
			return fail(err)
		case res.Acquired:
			return res, nil
		}
		if err := d.waitDelete(ctx, pred, predRev, s); err != nil {
			return fail(err)
		}
	}
}

// queuedError wraps err with the lock's name. The core adds ctx's cause
// (dlock.ErrClosed when the Locker closes) when err does not carry it.
func queuedError(l driver.Lease, err error) error {
	return fmt.Errorf("etcdlock: acquire %q: %w", l.Name, err)
}

// transient reports whether err may go away on a new attempt while ctx
// lives: a lost session (a new one is granted) or an unavailable server.
func (d *etcdDriver) transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errClosed) {
		return false
	}
	if errors.Is(err, errLeaseGone) {
		return true
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// enqueue puts key (its value: the holder's metadata), attached to s's lease, unless it exists already (a
// retry whose reply was lost), and returns its create revision. It does not
// give up when ctx ends, only after cleanupTimeout: the caller must learn
// the key's revision to delete it, or a create landing after its clean-up
// would queue a key that nobody deletes until the session ends.
func (d *etcdDriver) enqueue(ctx context.Context, key, metadata string, s *session) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		resp, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, metadata, clientv3.WithLease(s.id))).
			Else(clientv3.OpGet(key)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			d.lose(s, errLeaseGone)
			return 0, errLeaseGone
		}
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == s.id {
			return kvs[0].CreateRevision, nil
		}
		if attempt == 3 {
			return 0, fmt.Errorf("key %q keeps existing on another lease", key)
		}
		if len(kvs) == 1 {
			// Left from a session this driver lost: replace it.
			if _, err := d.deleteKey(ctx, key, kvs[0].CreateRevision); err != nil {
				return 0, err
			}
		}
	}
}

// position reads, with one transaction, key and the key queued just before
// it. If key heads the queue and is still attached to s, which is still
// alive, it takes the lock. Otherwise it returns the predecessor's key and
// its create revision. It returns errGone if key or s is gone.
func (d *etcdDriver) position(ctx context.Context, l driver.Lease, key string, rev int64, s *session) (driver.Result, string, int64, error) {
	if d.dead(s) {
		return driver.Result{}, "", 0, errGone // queue again on a new session
	}
	pred := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	resp, err := d.cli.Txn(ctx).Then(
		clientv3.OpGet(key),
		clientv3.OpGet(Key(d.prefix, l.Name), pred...),
	).Commit()
	if err != nil {
		return driver.Result{}, "", 0, err
	}
	own := resp.Responses[0].GetResponseRange().GetKvs()
	if len(own) == 0 || own[0].CreateRevision != rev || clientv3.LeaseID(own[0].Lease) != s.id {
		return driver.Result{}, "", 0, errGone
	}
	if before := resp.Responses[1].GetResponseRange().GetKvs(); len(before) > 0 {
		return driver.Result{}, string(before[0].Key), before[0].CreateRevision, nil
	}
	if !d.alive(s) {
		return driver.Result{}, "", 0, errGone
	}
	res, err := d.hold(l, key, rev, s)
	if err != nil && !errors.Is(err, errClosed) {
		err = errGone
	}
	return res, "", 0, err
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
	ctx, cancel := cleanupContext()
	defer cancel()
	if rev == 0 {
		resp, err := d.cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return
		}
		rev = resp.Kvs[0].CreateRevision
	}
	if _, err := d.deleteKey(ctx, key, rev); err != nil {
		d.orphan(key, rev)
	}
}
