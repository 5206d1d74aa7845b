package dlock

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Observe sends the current holders of name (an empty slice while it is free), then each
// change, until ctx ends; then it closes the channel. Backends that can notify push changes;
// the others poll no slower than Config.MaxRetryInterval.
//
// Holders are sorted by fencing token, so the first of a lock's is the
// one that took it first. A change is a holder coming or going, or a
// holder's metadata changing; a lease being renewed is not a change. The
// channel is unbuffered: a slow reader gets the state as of its next
// read, not every step in between. If the store fails, Observe keeps
// asking it, with the same bound, and reports the state once it answers;
// it never reports a guess. The channel also closes when the Locker
// closes. The error wraps ErrUnsupported if the backend cannot inspect.
//
// A holder seen here is a hint for people and dashboards, never proof of
// ownership: by the time it is read the holder may be gone.
func (l *Locker) Observe(ctx context.Context, name string) (<-chan []LockInfo, error) {
	if ctx == nil {
		return nil, errorf("dlock: observe %s: nil context: %w", quote(name), ErrInvalid)
	}
	if err := driver.ValidateName(name); err != nil {
		return nil, errorf("dlock: observe: %w", err)
	}
	in, ok := l.drv.(driver.Inspector)
	if !ok {
		return nil, errorf("dlock: observe %s: %w", quote(name), ErrUnsupported)
	}
	o := &observer{l: l, in: in, name: name, out: make(chan []LockInfo)}
	if err := o.subscribe(ctx); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		o.stop()
		return nil, errorf("dlock: observe %s: %w", quote(name), ErrClosed)
	}
	l.bg.Add(1)
	l.mu.Unlock()
	go o.run(ctx) // exits when ctx ends or the Locker closes
	return o.out, nil
}

// observer is one Observe call.
type observer struct {
	l       *Locker
	in      driver.Inspector
	name    string
	out     chan []LockInfo
	changed <-chan struct{} // the store's notifications; nil without
	pushed  bool            // changed reports every change, not only releases
	local   chan struct{}   // releases in this Locker
	stops   []func()
}

// subscribe starts the notifications Observe waits on, before its first
// look at the store, so that no change after that look is missed.
func (o *observer) subscribe(ctx context.Context) error {
	var (
		ch   <-chan struct{}
		stop func()
		err  error
	)
	switch d := o.l.drv.(type) {
	case driver.ChangeNotifier:
		ch, stop, err = d.WatchChanges(ctx, o.name)
		o.pushed = true
	case driver.Notifier:
		ch, stop, err = d.Watch(ctx, o.name)
	}
	err = o.l.storeError(err)
	switch {
	case err != nil && ctx.Err() != nil:
		return errorf("dlock: observe %s: %w", quote(o.name), ctxErr(ctx))
	case err != nil:
		o.pushed = false // polling makes up for the missing notifications
	case stop != nil:
		o.changed = ch
		o.stops = append(o.stops, stop)
	}
	o.local = o.l.addWaiter(o.name)
	o.stops = append(o.stops, func() { o.l.removeWaiter(o.name, o.local) })
	return nil
}

func (o *observer) stop() {
	for _, s := range o.stops {
		s()
	}
}

func (o *observer) run(ctx context.Context) {
	defer o.l.bg.Done()
	defer close(o.out)
	defer o.stop()
	var (
		last  []LockInfo
		sent  bool
		delay time.Duration // backoff after a failed look
	)
	for {
		infos, err := o.look(ctx)
		next := o.l.maxRetry
		if o.pushed {
			next = observeSafetyPoll
		}
		if err == nil {
			delay = 0
			if !sent || !sameHolders(last, infos) {
				select {
				case o.out <- infos:
				case <-ctx.Done():
					return
				case <-o.l.closing:
					return
				}
				last, sent = infos, true
			}
			// Stores may let a lease lapse without telling: look again
			// just after the first one would have.
			for _, h := range infos {
				if h.Remaining > 0 {
					next = min(next, h.Remaining+time.Millisecond)
				}
			}
		} else {
			delay = min(max(2*delay, o.l.minRetry), o.l.maxRetry)
			next = delay
		}
		t := time.NewTimer(next)
		select {
		case <-o.changed:
		case <-o.local:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-o.l.closing:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// observeSafetyPoll is how often Observe looks at a store that pushes
// every change anyway, in case a notification was lost.
const observeSafetyPoll = 30 * time.Second

// look returns name's holders sorted by fence (never nil).
func (o *observer) look(ctx context.Context) ([]LockInfo, error) {
	hs, err := call(o.l, ctx, func() ([]driver.Holder, error) { return o.in.Inspect(ctx, []string{o.name}) }, nil)
	if err != nil {
		return nil, o.l.storeError(err)
	}
	infos := make([]LockInfo, 0, len(hs))
	for _, h := range hs {
		if h.Name == o.name {
			infos = append(infos, LockInfo(h))
		}
	}
	slices.SortFunc(infos, func(a, b LockInfo) int { return cmp.Compare(a.Fence, b.Fence) })
	return infos, nil
}

// sameHolders reports whether a and b list the same holders, whatever
// their leases left.
func sameHolders(a, b []LockInfo) bool {
	return slices.EqualFunc(a, b, func(x, y LockInfo) bool {
		x.Remaining, y.Remaining = 0, 0
		return x == y
	})
}
