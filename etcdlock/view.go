package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// A queue view is a Locker's copy of one name's queue of keys, kept by a
// single watch on the name's prefix while some acquisition of the Locker
// waits on it: its waiters find the keys just before their own in it,
// and are woken by its delete events, so a handoff costs the same
// requests and the same server work whatever the queue's length (see
// DESIGN.md, "Waiting at scale").

// viewKey is a key of a name's queue as its view knows it.
type viewKey struct {
	key   string
	rev   int64 // create revision
	lease clientv3.LeaseID
	mode  sessionlock.Mode
}

// queueView is one name's queue, as of revision rev: the keys under
// prefix in create-revision order, kept by a watch started before the
// read that filled it. Keys created before a given key only ever leave,
// so what the view says of the keys before a key it has seen created
// stays true of the store at every later revision, but for those that
// left since.
type queueView struct {
	prefix string
	stop   context.CancelFunc
	ready  chan struct{} // closed once the view has read the queue or ended

	mu    sync.Mutex
	read  int64 // the revision of the read that filled the view
	rev   int64
	keys  []viewKey                // by create revision
	revs  map[string]int64         // key -> create revision
	gone  map[string]chan struct{} // closed when the key leaves
	moved chan struct{}            // closed (and replaced) when rev moves or the view ends
	err   error                    // why the view ended; nil while it lives
}

// errViewEnded is the error of a view whose watch ended without one.
var errViewEnded = errors.New("etcdlock: queue watch ended")

// views are a driver's queue views, by name prefix, and the entries that
// use each (a view lives while one does).
type views struct {
	mu    sync.Mutex
	slots map[string]*viewSlot
}

type viewSlot struct {
	users map[string]struct{} // entry keys
	v     *queueView          // nil until needed, or once ended
}

// waiting counts the waits blocked in queue.Wait, for tests.
var waiting atomic.Int64

// namePrefix returns the prefix of the name whose queue key is in.
func namePrefix(key string) string { return key[:strings.LastIndexByte(key, '/')+1] }

// view returns the live view of e's queue, starting one if needed, once
// it has read the queue, and counts e among its users until unview(e).
func (d *etcdDriver) view(ctx context.Context, e entry) (*queueView, error) {
	p := namePrefix(e.key)
	d.views.mu.Lock()
	s := d.views.slots[p]
	if s == nil {
		s = &viewSlot{users: make(map[string]struct{})}
		d.views.slots[p] = s
	}
	s.users[e.key] = struct{}{}
	if s.v == nil || s.v.ended() {
		v, err := d.startView(p)
		if err != nil {
			d.views.mu.Unlock()
			return nil, err
		}
		s.v = v
	}
	v := s.v
	d.views.mu.Unlock()
	select {
	case <-v.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v, v.err
}

// unview ends e's use of its queue's view; the last user's ends the view.
func (d *etcdDriver) unview(e entry) {
	p := namePrefix(e.key)
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	s := d.views.slots[p]
	if s == nil {
		return
	}
	delete(s.users, e.key)
	if len(s.users) == 0 {
		if s.v != nil {
			s.v.stop()
		}
		delete(d.views.slots, p)
	}
}

// startView starts the view of the queue under p; d.views.mu is held.
// Its goroutine exits when the view is stopped, its watch ends, or the
// driver closes.
func (d *etcdDriver) startView(p string) (*queueView, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, dlock.ErrClosed
	}
	ctx, cancel := context.WithCancel(d.ctx)
	v := &queueView{prefix: p, stop: cancel, ready: make(chan struct{}), moved: make(chan struct{}),
		revs: make(map[string]int64), gone: make(map[string]chan struct{})}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer cancel()
		v.end(d.follow(ctx, v))
	}()
	return v, nil
}

// follow sets the view's watch, reads the queue, then applies the watch's
// events until it ends, and returns why.
func (d *etcdDriver) follow(ctx context.Context, v *queueView) error {
	wch := d.cli.Watch(clientv3.WithRequireLeader(ctx), v.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	resp, ok := <-wch
	if !ok {
		return cmpOr(ctx.Err(), errViewEnded)
	}
	if err := resp.Err(); err != nil {
		return err
	}
	// The watch is set: every change after its start revision reaches it,
	// and this read is at or after that revision.
	g, err := d.cli.Get(ctx, v.prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return err
	}
	v.load(g.Kvs, g.Header.Revision)
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		v.apply(resp.Events)
	}
	return cmpOr(ctx.Err(), errViewEnded)
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// load fills the view with kvs, the queue read at rev.
func (v *queueView) load(kvs []*mvccpb.KeyValue, rev int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, kv := range kvs {
		v.add(kv)
	}
	v.read, v.rev = rev, rev
	close(v.ready)
}

// apply applies a watch response's events, skipping those the read that
// filled the view saw already. (The events of one transaction share its
// revision.)
func (v *queueView) apply(evs []*clientv3.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	moved := false
	for _, ev := range evs {
		kv := ev.Kv
		if kv.ModRevision <= v.read {
			continue
		}
		if ev.Type == mvccpb.DELETE {
			v.remove(string(kv.Key))
		} else if _, ok := v.revs[string(kv.Key)]; !ok {
			v.add(kv)
		}
		v.rev, moved = kv.ModRevision, true
	}
	if moved {
		close(v.moved)
		v.moved = make(chan struct{})
	}
}

// add appends kv, the newest key; v.mu is held.
func (v *queueView) add(kv *mvccpb.KeyValue) {
	k := string(kv.Key)
	m, _ := sessionlock.ParseTag(k[len(v.prefix):])
	v.keys = append(v.keys, viewKey{key: k, rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease), mode: m})
	v.revs[k] = kv.CreateRevision
}

// remove removes key and wakes its waiters; v.mu is held. The head of
// the queue, the usual key to go, costs no copy.
func (v *queueView) remove(key string) {
	rev, ok := v.revs[key]
	if !ok {
		return
	}
	delete(v.revs, key)
	if i, found := v.find(rev); found {
		if i == 0 {
			v.keys = v.keys[1:]
		} else {
			v.keys = slices.Delete(v.keys, i, i+1)
		}
	}
	if ch, ok := v.gone[key]; ok {
		close(ch)
		delete(v.gone, key)
	}
}

func (v *queueView) find(rev int64) (int, bool) {
	return slices.BinarySearchFunc(v.keys, rev, func(k viewKey, rev int64) int { return cmp.Compare(k.rev, rev) })
}

// end ends the view with err and wakes every waiter on it.
func (v *queueView) end(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.err = err
	select {
	case <-v.ready:
	default:
		close(v.ready)
	}
	for k, ch := range v.gone {
		close(ch)
		delete(v.gone, k)
	}
	close(v.moved)
	v.moved = make(chan struct{})
}

// isReady reports whether the view has read the queue.
func (v *queueView) isReady() bool {
	select {
	case <-v.ready:
		return true
	default:
		return false
	}
}

func (v *queueView) ended() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err != nil
}

// before returns the keys just before e that Place needs for mode m,
// oldest first, once the view has seen e created: the one before an
// exclusive key, the Limit before a permit, those back to the nearest
// exclusive one before a shared key. It returns sessionlock.ErrGone if
// e is not in the queue, and the view's error if it ends.
func (v *queueView) before(ctx context.Context, e entry, m sessionlock.Mode) ([]viewKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for v.rev < e.rev && v.err == nil {
		moved := v.moved
		v.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			v.mu.Lock()
			return nil, ctx.Err()
		}
		v.mu.Lock()
	}
	if v.err != nil {
		return nil, v.err
	}
	i, found := v.find(e.rev)
	if !found || v.keys[i].key != e.key || v.keys[i].lease != e.sess.id {
		return nil, sessionlock.ErrGone
	}
	from := 0
	switch n := m.Ahead(); {
	case n > 0:
		from = max(0, i-n)
	default:
		from = i
		for from > 0 && v.keys[from-1].mode.Shared {
			from--
		}
		from = max(0, from-1) // the exclusive key (or other kind) before them
	}
	return slices.Clone(v.keys[from:i]), nil
}

// goneCh returns a channel closed when key, created at rev, leaves the
// view or the view ends: at once if it has already.
func (v *queueView) goneCh(key string, rev int64) <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil || v.revs[key] != rev {
		return closed
	}
	ch, ok := v.gone[key]
	if !ok {
		ch = make(chan struct{})
		v.gone[key] = ch
	}
	return ch
}

var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()
