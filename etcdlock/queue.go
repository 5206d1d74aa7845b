package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
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
	res, err := sessionlock.Acquire(ctx, d.leases, refresh, queue{d: d}, l)
	return res, err
}

func (d *etcdDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	res, err := sessionlock.AcquireQueued(ctx, d.leases, queue{d: d, queued: true}, l)
	return res, err
}

// queue is the lock's queue of keys for sessionlock.Acquire and
// AcquireQueued: an entry is a key with its create revision and session,
// and so is each of the predecessors a waiter waits for. queued is set
// for AcquireQueued's: such a join may skip its reads (see Join).
type queue struct {
	d      *etcdDriver
	queued bool
}

// Classify is the driver's: sessionlock retries ErrorTransient.
func (q queue) Classify(err error) driver.ErrorKind { return q.d.Classify(err) }

// Join gets the live session for l's TTL (granting one if needed), puts
// the key and learns whether it holds, in one transaction. If it does not
// hold, its predecessors are left to Position, which finds them in the
// Locker's view of the queue. A queued acquisition whose Locker's view
// of the queue has keys in it (other waiters of this Locker wait there)
// puts its key without reading: it is all but certainly behind them, and
// if they left meanwhile, Position finds it holding. Its Result's Ahead
// is then the count of the view's keys.
func (q queue) Join(ctx context.Context, l driver.Lease) (entry, driver.Result, []entry, error) {
	s, err := q.d.sessionFor(ctx, l)
	if err != nil {
		return entry{}, driver.Result{}, nil, err
	}
	key := q.d.key(l)
	blind := -1
	if q.queued {
		blind = q.d.viewCount(key)
	}
	start := time.Now()
	j, err := q.d.enqueue(ctx, Key(q.d.prefix, l.Name), key, q.d.value(l), sessionlock.ModeOf(l), s, blind)
	q.d.joined(s)
	if err != nil {
		return entry{key: key, sess: s}, driver.Result{}, nil, err // the put may have been applied
	}
	e := entry{key: key, rev: j.rev, sess: s, ahead: j.ahead}
	if l.Delay > 0 {
		e.delay, e.val = l.Delay, q.d.value(l)
	}
	if !j.held {
		return e, driver.Result{Ahead: e.ahead}, nil, nil
	}
	res, err := q.d.hold(l, e, start)
	return e, res, nil, err
}

func (q queue) Position(ctx context.Context, l driver.Lease, e entry) (driver.Result, []entry, error) {
	return q.d.position(ctx, l, e)
}

// Wait waits for the deletion of any of preds, as the Locker's view of
// their queue sees it (none: Position has yet to read the view).
func (q queue) Wait(ctx context.Context, preds []entry) error {
	if len(preds) == 0 {
		return nil
	}
	v := q.d.liveView(preds[0].key)
	if v == nil {
		return nil // ended: read the queue again
	}
	waiting.Add(1)
	defer waiting.Add(-1)
	chans := make([]<-chan struct{}, len(preds))
	for i, p := range preds {
		chans[i] = v.goneCh(p.key, p.rev)
	}
	woken := chans[0]
	if len(chans) > 1 {
		// A permit's: any of the n keys before it.
		first := make(chan struct{})
		var once sync.Once
		stop := make(chan struct{})
		defer close(stop)
		for _, ch := range chans {
			go func() { // exits when Wait returns at the latest
				select {
				case <-ch:
					once.Do(func() { close(first) })
				case <-stop:
				}
			}()
		}
		woken = first
	}
	select {
	case <-woken:
		if woken != closed && !v.ended() {
			wakeups.Add(1)
		}
		return nil
	case <-preds[0].sess.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q queue) Leave(e entry) {
	if e.key != "" {
		q.d.unview(e)
		q.d.leave(e.key, e.rev)
	}
}

// joined is what enqueue learned: the key's create revision, how many
// keys under the name's prefix were ahead of it (-1 unknown), and whether
// it holds (false for a key found from an earlier attempt: Position
// tells).
type joined struct {
	rev   int64
	ahead int
	held  bool
}

// enqueue puts key (its value: the holder's metadata), attached to s's
// lease, unless it exists already (a retry whose reply was lost), and
// returns its create revision. In the same transaction, before the put,
// it reads what tells whether an entry of mode m holds (joinReads), and
// applies the rule to it; but if blind is positive, it reads nothing,
// and counts blind keys ahead of a key that does not hold. For a key
// that existed already it reads nothing. It does not give up when ctx ends, only after
// sessionlock.CleanupTimeout: the caller must learn the key's revision
// to delete it, or a create landing after its clean-up would queue a key
// that nobody deletes until the session ends.
func (d *etcdDriver) enqueue(ctx context.Context, prefix, key, metadata string, m sessionlock.Mode, s *session, blind int) (joined, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionlock.CleanupTimeout)
	defer cancel()
	var reads []clientv3.Op
	if blind <= 0 {
		reads = joinReads(prefix, m)
	}
	for attempt := 1; ; attempt++ {
		resp, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(append(reads, clientv3.OpPut(key, metadata, clientv3.WithLease(s.id)))...).
			Else(clientv3.OpGet(key)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			d.lose(s, errLeaseGone)
			return joined{}, errLeaseGone
		}
		if err != nil {
			return joined{}, err
		}
		if resp.Succeeded && blind > 0 {
			return joined{rev: resp.Header.Revision, ahead: blind}, nil
		}
		if resp.Succeeded {
			held, ahead, err := d.joinPlace(resp.Responses, m)
			return joined{rev: resp.Header.Revision, ahead: ahead, held: held}, err
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

// joinReads returns the reads, before the put of a key of mode m under a
// name's prefix (every key there is then ahead of it), that tell whether
// it holds, each costing etcd a bounded number of keys whatever the
// queue's length: the first keys in key order, m.Ahead() of them (one
// for a shared key), with the count of all; for a shared key also the
// count of the shared ones. A read sorted by create revision, or
// filtered by it, would make etcd fetch every key under the prefix
// (etcd's applier drops the limit of such a read).
func joinReads(prefix string, m sessionlock.Mode) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithLimit(int64(max(m.Ahead(), 1))))}
	if m.Ahead() == 0 {
		ops = append(ops, clientv3.OpGet(prefix+sharedTag, clientv3.WithRange(prefix+sharedEnd), clientv3.WithCountOnly()))
	}
	return ops
}

// The keys of shared holds are those in [prefix+sharedTag, prefix+sharedEnd).
const (
	sharedTag = "S."
	sharedEnd = "S/" // '/' follows '.'
)

// joinPlace applies the rule to the replies of joinReads: it returns
// whether the new key holds, how many keys were ahead of it, and an error
// wrapping driver.ErrMode if a key of another kind is among those read.
// With all the keys ahead read the rule applies as to any read of them;
// with some only, an exclusive key or a permit does not hold (more are
// ahead than it allows) and a shared one holds if every key ahead is
// shared.
func (d *etcdDriver) joinPlace(rs []*etcdserverpb.ResponseOp, m sessionlock.Mode) (bool, int, error) {
	r := rs[0].GetResponseRange()
	kvs := slices.Clone(r.GetKvs())
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	ahead := make([]sessionlock.Mode, len(kvs))
	for i, kv := range kvs {
		ahead[i], _ = d.parseKey(kv.Key)
	}
	held, _, err := sessionlock.Place(ahead, m)
	if err != nil {
		return false, 0, err
	}
	if all := int(r.GetCount()); all > len(kvs) {
		held = m.Ahead() == 0 && rs[1].GetResponseRange().GetCount() == r.GetCount()
	}
	return held, int(r.GetCount()), nil
}

// position finds, in the Locker's view of the queue, the keys just
// before e that the rule needs (sessionlock.Mode.Ahead: the one before
// an exclusive key, the n before a permit's, those back to the nearest
// exclusive key before a shared one). If e holds by sessionlock.Place
// and, read again, is still attached to its session, which is still
// alive, it takes the lock. Otherwise it returns the predecessors whose
// deletion may let it in. Either way the Result's Ahead is e's count
// from Join. It returns sessionlock.ErrGone if e or its session is gone,
// and an error wrapping driver.ErrMode if a key of another kind is among
// those before it.
func (d *etcdDriver) position(ctx context.Context, l driver.Lease, e entry) (driver.Result, []entry, error) {
	if e.sess.dead.Load() {
		d.unview(e)
		return driver.Result{}, nil, sessionlock.ErrGone // queue again on a new session
	}
	m := sessionlock.ModeOf(l)
	before, err := d.viewBefore(ctx, e, m)
	if err != nil {
		if errors.Is(err, sessionlock.ErrGone) {
			d.unview(e)
		}
		return driver.Result{}, nil, err
	}
	ahead := make([]sessionlock.Mode, len(before))
	for i, k := range before {
		ahead[i] = k.mode
	}
	held, wait, err := sessionlock.Place(ahead, m)
	if err != nil {
		return driver.Result{}, nil, err
	}
	if !held {
		preds := make([]entry, len(wait))
		for i, w := range wait {
			preds[i] = entry{key: before[w].key, rev: before[w].rev, sess: e.sess}
		}
		return driver.Result{Ahead: e.ahead}, preds, nil
	}
	return d.confirm(ctx, l, e)
}

// confirm takes the lock for e, which the view found holding, once a read
// of its key finds it still attached to its session (the hole of etcd's
// Mutex fixed by etcd PR 11408): its deadline counts from that read.
func (d *etcdDriver) confirm(ctx context.Context, l driver.Lease, e entry) (driver.Result, []entry, error) {
	start := time.Now()
	g, err := d.cli.Get(ctx, e.key)
	if err != nil {
		return driver.Result{}, nil, err
	}
	d.unview(e)
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != e.rev || clientv3.LeaseID(g.Kvs[0].Lease) != e.sess.id {
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	res, err := d.hold(l, e, start)
	return res, nil, err
}

// hold takes the lock for e, found holding by a request sent at start,
// if its session is alive. The Result's Ahead is e's count from Join.
func (d *etcdDriver) hold(l driver.Lease, e entry, start time.Time) (driver.Result, error) {
	if !d.alive(e.sess) {
		return driver.Result{}, sessionlock.ErrGone
	}
	res, err := d.leases.Hold(l.Owner, e, uint64(e.rev), l.TTL, start)
	if err != nil && !errors.Is(err, dlock.ErrClosed) {
		err = sessionlock.ErrGone
	}
	res.Ahead = e.ahead
	return res, err
}

// viewBefore returns the keys before e that Place needs for mode m, from
// the Locker's view of e's queue; a view whose watch ended (compacted, or
// without a leader) is replaced once.
func (d *etcdDriver) viewBefore(ctx context.Context, e entry, m sessionlock.Mode) ([]viewKey, error) {
	for attempt := 1; ; attempt++ {
		v, err := d.view(ctx, e)
		if err == nil {
			var before []viewKey
			if before, err = v.before(ctx, e, m); err == nil {
				return before, nil
			}
		}
		if attempt == 2 || v == nil || !v.ended() || ctx.Err() != nil || errors.Is(err, sessionlock.ErrGone) {
			return nil, err
		}
	}
}

// viewCount returns how many keys the live view of the queue key is in
// has, -1 if there is none.
func (d *etcdDriver) viewCount(key string) int {
	v := d.liveView(key)
	if v == nil {
		return -1
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil || !v.isReady() {
		return -1
	}
	return len(v.keys)
}

// liveView returns the view of the queue key is in, nil if there is none
// or it ended.
func (d *etcdDriver) liveView(key string) *queueView {
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	if s := d.views.slots[namePrefix(key)]; s != nil && s.v != nil && !s.v.ended() {
		return s.v
	}
	return nil
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
