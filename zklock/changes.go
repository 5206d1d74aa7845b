package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// MultiHolder implements driver.MultiHolder: shared holds and semaphores
// share the lock's queue of children (see the package doc).
func (d *zkDriver) MultiHolder() bool { return true }

// WatchChanges implements driver.ChangeNotifier with a watch on the
// children of name's parent znode (or on its existence while it does not
// exist), set again after each event: every child created or deleted
// sends a value. It returns once the first watch is set.
func (d *zkDriver) WatchChanges(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	parent := d.parent(name)
	ev, err := d.watchChildren(ctx, parent)
	if err != nil {
		return nil, nil, fmt.Errorf("zklock: watch %q: %w", name, err)
	}
	changed := make(chan struct{}, 1)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // exits when stop is called or the driver closes
		defer close(done)
		for {
			select {
			case <-ev:
			case <-wctx.Done():
				return
			case <-d.closing:
				return
			}
			// Set the next watch before telling: a change after the
			// watcher's next look then fires it.
			for {
				if ev, err = d.watchChildren(wctx, parent); err == nil {
					break
				}
				if !pause.For(wctx, sessionlock.RetryDelay) {
					return
				}
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	return changed, stop, nil
}

// watchChildren sets a watch on parent's children, or on its creation if
// it does not exist, and returns the watch's channel.
func (d *zkDriver) watchChildren(ctx context.Context, parent string) (<-chan zk.Event, error) {
	return sessionlock.Call(ctx, func() (<-chan zk.Event, error) {
		for {
			_, _, ev, err := d.conn.ChildrenW(parent)
			if !errors.Is(err, zk.ErrNoNode) {
				return ev, err
			}
			ok, _, ev, err := d.conn.ExistsW(parent)
			if err != nil || !ok {
				return ev, err
			}
			// Created meanwhile: watch its children.
		}
	})
}
