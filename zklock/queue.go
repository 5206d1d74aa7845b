package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// seqLen is the width of the sequence number ZooKeeper appends to a
// sequential child's name.
const seqLen = 10

// wakeups counts the watch events that woke waiters, for tests.
var wakeups atomic.Int64

// childPrefix is the name of l's child up to its sequence number: its
// mode's tag, its owner, "-".
func childPrefix(l driver.Lease) string { return sessionlock.ModeOf(l).Tag() + l.Owner + "-" }

// parseChild returns the mode and owner of a child of a lock's parent
// znode; ok is false for a name that is not a queue entry.
func parseChild(child string) (m sessionlock.Mode, owner string, ok bool) {
	if len(child) <= seqLen+1 || child[len(child)-seqLen-1] != '-' {
		return m, "", false
	}
	m, rest := sessionlock.ParseTag(child)
	return m, rest[:len(rest)-seqLen-1], true
}

func isOwnedBy(child, owner string) bool {
	_, o, ok := parseChild(child)
	return ok && o == owner
}

// queueOf sorts the queue entries among kids by sequence number and
// returns them with their modes.
func queueOf(kids []string) ([]string, []sessionlock.Mode) {
	kids = slices.DeleteFunc(kids, func(k string) bool { _, _, ok := parseChild(k); return !ok })
	slices.SortFunc(kids, bySeq)
	modes := make([]sessionlock.Mode, len(kids))
	for i, k := range kids {
		modes[i], _, _ = parseChild(k)
	}
	return kids, modes
}

func bySeq(a, b string) int { return strings.Compare(a[len(a)-seqLen:], b[len(b)-seqLen:]) }

func (d *zkDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	return sessionlock.Acquire(ctx, d.leases, d.refresh, queue{d}, l)
}

func (d *zkDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	return sessionlock.AcquireQueued(ctx, d.leases, queue{d}, l)
}

// queue is the lock's queue of children for sessionlock.Acquire and
// AcquireQueued: an entry is a child's path, a predecessor the paths of
// the children whose deletion may let it in (sessionlock.Place).
type queue struct{ d *zkDriver }

// Join creates l's child (or finds the one an attempt whose reply was
// lost created) and, unless the create found the child alone under its
// parent (then it holds, see create), reads its place in the queue.
func (q queue) Join(ctx context.Context, l driver.Lease) (string, driver.Result, []string, error) {
	parent := q.d.parent(l.Name)
	start := time.Now()
	c, err := q.d.enqueue(l, parent)
	if err != nil {
		return "", driver.Result{}, nil, err
	}
	if c.alone {
		res, err := q.d.hold(l, c.path, c.session, c.fence, start)
		return c.path, res, nil, err
	}
	if f := testhook.AfterCreate.Load(); f != nil {
		(*f)(c.path)
	}
	res, preds, err := q.d.position(ctx, l, parent, c.path)
	if err != nil && transient(err) {
		q.d.setUnsure(l.Owner, true) // so that the next Join finds path
	}
	if c.ahead > 0 && err == nil {
		// The entries ahead when the child was made, not when position
		// read them: a holder may have left in between. Every one of them
		// keeps an exclusive child out, so such a child that holds at the
		// first read was passed the lock.
		res.Ahead = c.ahead
		res.Waited = res.Acquired && !l.Shared && l.Limit == 0
	}
	return c.path, res, preds, err
}

func (q queue) Position(ctx context.Context, l driver.Lease, path string) (driver.Result, []string, error) {
	return q.d.position(ctx, l, q.d.parent(l.Name), path)
}

// Wait sets a watch on each of preds and waits for the first event.
func (q queue) Wait(ctx context.Context, preds []string) error {
	if len(preds) == 1 {
		ev, err := q.d.watch(ctx, preds[0])
		if err != nil || ev == nil {
			return err // failed, or the predecessor is gone already
		}
		if err := waitFired(ctx, ev); err != nil {
			return err
		}
		q.d.watches.drop(preds[0], ev)
		return nil
	}
	// A permit's: the watches are pipelined on the connection.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type watchResult struct {
		path string
		ev   <-chan zk.Event
		err  error
	}
	set := make(chan watchResult, len(preds))
	for _, p := range preds {
		go func() { // exits when the bounded request returns
			ev, err := q.d.watch(ctx, p)
			set <- watchResult{p, ev, err}
		}()
	}
	fired := make(chan struct{}, len(preds))
	for range preds {
		r := <-set
		if r.err != nil || r.ev == nil {
			return r.err // failed, or a predecessor is gone already
		}
		go func() { // exits when the event comes or Wait returns
			select {
			case <-r.ev:
				q.d.watches.drop(r.path, r.ev)
				fired <- struct{}{}
			case <-ctx.Done():
			}
		}()
	}
	return waitFired(ctx, fired)
}

// waitFired waits for a value on fired (a watch's event) or ctx's end.
func waitFired[T any](ctx context.Context, fired <-chan T) error {
	select {
	case <-fired:
		wakeups.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q queue) Leave(path string) {
	if path != "" {
		q.d.leave(path)
	}
}

// Classify is the driver's: sessionlock retries ErrorTransient.
func (q queue) Classify(err error) driver.ErrorKind { return q.d.Classify(err) }

// created is what enqueue learned of the child it created or found.
type created struct {
	path string
	// alone is set if the child was the only child of its parent when
	// it was created, by the connection's current session: it holds
	// then, with fence its czxid and session its ephemeral owner.
	alone   bool
	fence   uint64
	session int64
	// ahead is how many children the parent had besides this one right
	// after the create (all made before it), or 0 if not known.
	ahead int
}

// enqueue creates the owner's ephemeral sequential child under parent, or
// finds the one an attempt whose reply was lost created. It is not
// cancellable: the zk client bounds it, and the caller must learn the
// path to delete the child.
func (d *zkDriver) enqueue(l driver.Lease, parent string) (created, error) {
	prefix := parent + "/" + childPrefix(l)
	d.mu.Lock()
	unsure := d.unsure[l.Owner]
	d.mu.Unlock()
	// A missing parent (NoNode: not made yet, reaped as an empty
	// container, or lost with a server restarted empty) and a transient
	// failure are retried up to 3 times each, on their own counts: after a
	// restart the first creates can fail both ways in turn, and one count
	// for both gave up with "node does not exist" on a name whose parent
	// the next attempt would have made.
	noNodes, transients := 0, 0
	for {
		if unsure {
			// An earlier create's reply was lost: it may have been
			// applied.
			if path, ok := d.find(parent, l.Owner); ok {
				d.setUnsure(l.Owner, false)
				return created{path: path}, nil
			}
		}
		session := d.conn.SessionID()
		path, st, err := d.create(prefix, parent, []byte(l.Metadata))
		switch {
		case err == nil:
			d.setUnsure(l.Owner, false)
			c := created{path: path}
			if st != nil {
				c.ahead = int(st.NumChildren) - 1
			}
			if st != nil && st.NumChildren == 1 && session != 0 &&
				d.conn.SessionID() == session && d.conn.State() == zk.StateHasSession {
				// Session ids are never reused, so the request went out
				// on session: the child's ephemeral owner.
				c.alone, c.fence, c.session = true, uint64(st.Mzxid), session
			}
			return c, nil
		case errors.Is(err, zk.ErrNoNode) && noNodes < 3:
			noNodes++
			if err := d.makeParents(parent); err != nil {
				return created{}, err
			}
		case transient(err):
			unsure = true
			if transients++; transients < 3 {
				continue
			}
			d.setUnsure(l.Owner, true) // for the caller's next attempt
			return created{}, err
		case errors.Is(err, zk.ErrNoAuth):
			return created{}, fmt.Errorf("create a child of %s: the connection's identity needs CREATE and DELETE on it: %w", parent, err)
		case isQuotaExceeded(err):
			return created{}, fmt.Errorf("create a child of %s: %w", parent, explainQuota(err))
		default:
			return created{}, err
		}
	}
}

// above returns the path of the znode above path ("/" for a top one).
func above(path string) string {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return path[:i]
	}
	return "/"
}

// create creates an ephemeral sequential child named prefix + sequence
// number, and in the same transaction writes the (always empty) data of
// its parent: the parent's new stat then tells, at no extra round trip,
// how many children the parent has right after the create (NumChildren)
// and the transaction's zxid, which is the child's czxid (Mzxid). The
// zk client has no create that returns the created node's stat. If the
// ACL of parent denies WRITE (a parent dlock did not create), create
// creates the child alone and returns a nil stat.
func (d *zkDriver) create(prefix, parent string, data []byte) (string, *zk.Stat, error) {
	rs, err := d.conn.Multi(
		&zk.CreateRequest{Path: prefix, Data: data, Acl: d.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: parent, Data: nil, Version: -1},
	)
	if len(rs) == 2 && rs[0].Error == nil && errors.Is(rs[1].Error, zk.ErrNoAuth) {
		path, err := d.conn.Create(prefix, data, zk.FlagEphemeralSequential, d.acl)
		return path, nil, err
	}
	if err != nil {
		return "", nil, err
	}
	if len(rs) != 2 || rs[1].Stat == nil {
		return "", nil, fmt.Errorf("create %s: multi returned %d results", prefix, len(rs))
	}
	return rs[0].String, rs[1].Stat, nil
}

// find returns the path of owner's child under parent, if it has one.
func (d *zkDriver) find(parent, owner string) (string, bool) {
	kids, _, err := d.conn.Children(parent)
	if err != nil {
		return "", false
	}
	for _, k := range kids {
		if isOwnedBy(k, owner) {
			return parent + "/" + k, true
		}
	}
	return "", false
}

// takeUnsure reports whether owner may have a child whose create reply
// was lost, and forgets it.
func (d *zkDriver) takeUnsure(owner string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	unsure := d.unsure[owner]
	delete(d.unsure, owner)
	return unsure
}

// setUnsure records whether owner may have a child whose create reply was
// lost.
func (d *zkDriver) setUnsure(owner string, unsure bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if unsure {
		d.unsure[owner] = true
	} else {
		delete(d.unsure, owner)
	}
}

// makeParents creates the missing znodes of path as containers.
func (d *zkDriver) makeParents(path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		p := path[:i]
		_, err := d.conn.CreateContainer(p, nil, zk.FlagContainer, d.acl)
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
		case errors.Is(err, zk.ErrNoAuth):
			// ZooKeeper checks CREATE on the znode above p before it
			// looks for p: an existing p may say NoAuth.
			if ok, _, err := d.conn.Exists(p); err == nil && ok {
				continue
			}
			return fmt.Errorf("create %s: the connection's identity needs CREATE on %s: %w", p, above(p), err)
		default:
			return fmt.Errorf("create %s: %w", p, explainQuota(err))
		}
	}
	return nil
}

// position reads the queue under parent. If path holds by
// sessionlock.Place, it checks that path is still owned by the
// connection's session and takes the lock. Otherwise it returns the paths
// of the children whose deletion may let it in. Either way the Result's
// Ahead is how many children this read finds ahead of path (the read
// lists them all anyway). It returns
// sessionlock.ErrGone if path is not in the queue, and an error wrapping
// driver.ErrMode if an entry of another kind is ahead of it.
func (d *zkDriver) position(ctx context.Context, l driver.Lease, parent, path string) (driver.Result, []string, error) {
	// Read the child's stat alongside the queue, pipelined on the
	// connection: it is needed if the child heads the queue.
	type statResult struct {
		ok   bool
		stat *zk.Stat
		err  error
	}
	start := time.Now()
	statc := make(chan statResult, 1)
	go func() { // exits when the bounded request returns
		ok, st, err := d.exists(ctx, path)
		statc <- statResult{ok, st, err}
	}()
	kids, err := d.children(ctx, parent)
	own := <-statc
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	if err != nil {
		return driver.Result{}, nil, err
	}
	kids, modes := queueOf(kids)
	child := path[strings.LastIndexByte(path, '/')+1:]
	idx := slices.Index(kids, child)
	if idx < 0 {
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	for _, k := range kids {
		if k != child && isOwnedBy(k, l.Owner) {
			d.leave(parent + "/" + k) // a duplicate from a retried create
		}
	}
	held, wait, err := sessionlock.Place(modes[:idx], modes[idx])
	if err != nil {
		return driver.Result{}, nil, err
	}
	if !held {
		preds := make([]string, len(wait))
		for i, w := range wait {
			preds[i] = parent + "/" + kids[w]
		}
		return driver.Result{Ahead: idx}, preds, nil
	}
	// It holds: make sure the child is still ours before taking the
	// lock (an expired session's child is on its way out).
	ok, st := own.ok, own.stat
	if own.err != nil {
		return driver.Result{}, nil, own.err
	}
	if !ok || st.EphemeralOwner != d.conn.SessionID() || d.conn.State() != zk.StateHasSession {
		if ok {
			d.leave(path)
		}
		return driver.Result{}, nil, sessionlock.ErrGone
	}
	res, err := d.hold(l, path, st.EphemeralOwner, uint64(st.Czxid), start)
	res.Ahead = idx
	return res, nil, err
}

// hold takes the lock for l's child at path, which holds by the queue's
// rule and belongs to session; start is the send time of the request
// that found it so.
func (d *zkDriver) hold(l driver.Lease, path string, session int64, fence uint64, start time.Time) (driver.Result, error) {
	res, err := d.leases.Hold(l.Owner, entry{path: path, session: session}, fence, l.TTL, start)
	if err != nil {
		d.leave(path)
	}
	return res, err
}

// watch sets a data watch on path, a predecessor's child, and returns
// its channel, or nil if path does not exist. The predecessor's deletion
// fires it (so would a write of its data, which dlock never makes; the
// waiter then reads the queue again and finds it still there).
//
// It reads the node (getData) rather than asking whether it exists, as
// Curator's lock recipe does: for a node that is gone, ZooKeeper answers
// NoNode and sets no watch, and the client keeps no channel, whereas an
// exists-watch would stay on the server and in the client's watcher map
// until the path is created again, which a sequential child's path never
// is (issue 24: the server's watch count grew by 20,000 a minute).
//
// A wait that ends by its ctx while path still exists leaves its watch
// set: on the server (one per path and connection) and in the client (a
// channel), which the driver's later waits on path share (see watchSet)
// rather than set again. That is bounded: path is an ephemeral child
// whose deletion (a release, a cancelled wait, the end of its session)
// fires and removes it, and Close of the connection drops it.
func (d *zkDriver) watch(ctx context.Context, path string) (<-chan zk.Event, error) {
	if ev, ok := d.watches.get(path); ok {
		return ev, nil
	}
	ev, err := sessionlock.Call(ctx, func() (<-chan zk.Event, error) {
		_, _, ev, err := d.conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return ev, err
	})
	if err != nil || ev == nil {
		return nil, err
	}
	return d.watches.put(path, ev), nil
}

// leave deletes a queued child with a fresh bounded context (the caller's
// may have ended). If that fails, the child becomes an orphan, deleted
// when the connection allows.
func (d *zkDriver) leave(path string) {
	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	if err := d.delete(ctx, path); err != nil {
		d.leases.Orphan(entry{path: path})
	}
}
