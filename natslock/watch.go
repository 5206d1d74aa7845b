package natslock

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Watch implements driver.Notifier: a watch of name's key, from its next
// revision on. The core keeps one per Locker and name, however many of
// its acquisitions wait. Any write wakes: a release, a hold taken out, a
// change of the holders that may let a shared hold or permit in.
func (d *natsDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watch(ctx, name)
}

// WatchChanges implements driver.ChangeNotifier: every write of name's
// key is a change of its holders.
func (d *natsDriver) WatchChanges(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watch(ctx, name)
}

// watch subscribes to the writes of name's key. kv.Watch returns once its
// consumer exists on the server, delivering only what is written after.
// The goroutine it starts here forwards them to the channel returned, and
// ends when stop stops the watcher (which closes its updates).
func (d *natsDriver) watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := d.kv.Watch(wctx, d.key(name), jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		return nil, nil, d.fail("watch", name, err)
	}
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range w.Updates() {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	stop := func() {
		_ = w.Stop()
		cancel()
		<-done
	}
	return ch, stop, nil
}
