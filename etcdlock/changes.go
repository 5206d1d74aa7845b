package etcdlock

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// MultiHolder implements driver.MultiHolder: shared holds and semaphores
// share the lock's queue of keys (see the package doc).
func (d *etcdDriver) MultiHolder() bool { return true }

// WatchChanges implements driver.ChangeNotifier with a watch on the keys
// under Key(prefix, name): every key put or deleted sends a value. It
// returns once the watch is set on the server. A watch the server ends
// (compaction, a lost leader) is set again, and a value sent.
func (d *etcdDriver) WatchChanges(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wctx, cancel := context.WithCancel(d.ctx) // d.ctx ends at Close
	wch, err := d.watchPrefix(ctx, wctx, Key(d.prefix, name))
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("etcdlock: watch %q: %w", name, err)
	}
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { // exits when stop is called or the driver closes
		defer close(done)
		for {
			for resp := range wch {
				if len(resp.Events) > 0 {
					signal(changed)
				}
			}
			for {
				if wctx.Err() != nil {
					return
				}
				if wch, err = d.watchPrefix(wctx, wctx, Key(d.prefix, name)); err == nil {
					break
				}
				if !pause.For(wctx, sessionlock.RetryDelay) {
					return
				}
			}
			signal(changed) // changes while no watch was set
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	return changed, stop, nil
}

// watchPrefix sets a watch, that lives as long as wctx, on the keys under
// prefix and returns its channel once the server confirmed it, or an
// error if ctx ends first or the watch fails.
func (d *etcdDriver) watchPrefix(ctx, wctx context.Context, prefix string) (clientv3.WatchChan, error) {
	wch := d.cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if !ok {
			if err := context.Cause(wctx); err != nil {
				return nil, err
			}
			return nil, errWatchEnded
		}
		if err := resp.Err(); err != nil {
			return nil, err
		}
		return wch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errWatchEnded = errors.New("etcdlock: watch ended before it was set")

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
