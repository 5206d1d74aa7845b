package kubelock

import (
	"context"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// rewatchDelay is the pause before a watch that failed is opened again.
const rewatchDelay = 100 * time.Millisecond

// hub keeps one watch per Lease name for all of a Locker's waiters on it,
// and fans its wake-ups out to them.
type hub struct {
	leases LeaseClient

	mu     sync.Mutex
	names  map[string]*nameWatch
	closed bool
}

// nameWatch is the watch of one Lease. Its goroutine (start, then run)
// is owned by the hub and exits when the last subscriber stops or the
// hub closes.
type nameWatch struct {
	subs  map[chan struct{}]struct{} // guarded by hub.mu
	ctx   context.Context            // ends when the watch is to stop
	stop  context.CancelFunc
	ready chan struct{} // closed once the watch runs on the server, or could not be opened
	err   error         // why it could not be opened; read once ready is closed
	done  chan struct{} // closed when its goroutine returns
}

func newHub(leases LeaseClient) *hub {
	return &hub{leases: leases, names: make(map[string]*nameWatch)}
}

// Watch implements driver.Notifier: the channel receives a value whenever
// the Lease of name is released (no holder) or deleted, and after the
// watch had to be opened again (a wake-up may have been missed).
func (d *kubeDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watches.subscribe(ctx, leaseName(name))
}

// subscribe joins the watch of the Lease lease, opening it first if this
// Locker has none, and returns once it runs on the server. The watch is
// opened by a goroutine of its own, outside the hub's lock: waiters on
// other names, and Close, do not wait for it; waiters on the same name
// join it rather than open another.
func (h *hub) subscribe(ctx context.Context, lease string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, nil, errClosed
	}
	nw := h.names[lease]
	if nw == nil {
		wctx, stop := context.WithCancel(context.Background())
		nw = &nameWatch{subs: make(map[chan struct{}]struct{}), ctx: wctx, stop: stop,
			ready: make(chan struct{}), done: make(chan struct{})}
		h.names[lease] = nw
		go h.start(lease, nw)
	}
	nw.subs[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	cancel := func() { once.Do(func() { h.unsubscribe(lease, nw, ch) }) }
	select {
	case <-nw.ready:
		if nw.err != nil {
			cancel()
			return nil, nil, nw.err
		}
		return ch, cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
}

// start opens nw's watch and runs it; if it cannot be opened, it drops nw
// from the hub and hands the error to nw's subscribers.
func (h *hub) start(lease string, nw *nameWatch) {
	w, rv, err := h.open(nw.ctx, lease, "")
	if err != nil {
		h.mu.Lock()
		if h.names[lease] == nw {
			delete(h.names, lease)
		}
		h.mu.Unlock()
		nw.stop()
		nw.err = err
		close(nw.ready)
		close(nw.done)
		return
	}
	close(nw.ready)
	h.run(nw.ctx, lease, nw, w, rv)
}

// unsubscribe removes ch from nw, and ends nw's watch if it was the last.
func (h *hub) unsubscribe(lease string, nw *nameWatch, ch chan struct{}) {
	h.mu.Lock()
	delete(nw.subs, ch)
	last := len(nw.subs) == 0 && h.names[lease] == nw
	if last {
		delete(h.names, lease)
	}
	h.mu.Unlock()
	if last {
		nw.stop()
		<-nw.done
	}
}

// open lists the Lease to learn the current resourceVersion (unless rv
// is given) and opens a watch from it, so that no change after the list
// is missed even if the watch registers late on the server.
func (h *hub) open(ctx context.Context, lease, rv string) (watch.Interface, string, error) {
	sel := fields.OneTermEqualSelector("metadata.name", lease).String()
	if rv == "" {
		list, err := h.leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, "", err
		}
		rv = list.ResourceVersion
	}
	w, err := h.leases.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return nil, "", err
	}
	return w, rv, nil
}

// run reads w until ctx ends, waking nw's subscribers on each release or
// deletion, and opens the watch again (from the last resourceVersion it
// saw, or from a new list when that is too old) whenever it ends.
func (h *hub) run(ctx context.Context, lease string, nw *nameWatch, w watch.Interface, rv string) {
	defer close(nw.done)
	for {
		rv = h.drain(ctx, nw, w, rv)
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		h.wake(nw) // something may have happened while no watch ran
		for w = nil; w == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(rewatchDelay):
			}
			var err error
			if w, rv, err = h.open(ctx, lease, rv); err != nil {
				rv = "" // too old (410 Gone), or the server is away: list again
			}
		}
	}
}

// drain reads w's events until it ends or ctx does, and returns the last
// resourceVersion seen ("" after an error event: list again).
func (h *hub) drain(ctx context.Context, nw *nameWatch, w watch.Interface, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			if ev.Type == watch.Error {
				return ""
			}
			lease, ok := ev.Object.(*coordv1.Lease)
			if !ok {
				continue
			}
			rv = lease.ResourceVersion
			if ev.Type == watch.Deleted || (ev.Type != watch.Bookmark && holderOf(lease) == "") {
				h.wake(nw)
			}
		}
	}
}

// wake sends a wake-up to every subscriber of nw that has none pending.
func (h *hub) wake(nw *nameWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range nw.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close ends every watch and waits for their goroutines.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	names := h.names
	h.names = map[string]*nameWatch{}
	h.mu.Unlock()
	for _, nw := range names {
		nw.stop()
		<-nw.done
	}
}
