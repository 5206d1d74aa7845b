package zklock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// holders returns the holding children of the lock whose parent znode is
// parent (a prefix of its queue by sequence number, sessionlock.Holding),
// with their modes.
func (d *zkDriver) holders(ctx context.Context, parent string) ([]string, []sessionlock.Mode, error) {
	kids, err := d.children(ctx, parent)
	if err != nil && err != zk.ErrNoNode {
		return nil, nil, err
	}
	kids, modes := queueOf(kids)
	n := sessionlock.Holding(modes)
	return kids[:n], modes[:n], nil
}

type getResult struct {
	data []byte
	stat *zk.Stat
}

// Inspect implements driver.Inspector: a lock's holders are the children
// at the head of its queue that hold by the queue's rule (see package
// sessionlock's Mode); a child's data is its holder's metadata and its
// czxid the fencing token. Leases are kept by the holders' drivers, so
// Remaining is 0 (unknown).
func (d *zkDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	if len(names) == 0 {
		parents, err := d.children(ctx, d.prefix)
		if err != nil && err != zk.ErrNoNode {
			return nil, fmt.Errorf("zklock: inspect: %w", err)
		}
		for _, p := range parents {
			if n, err := url.PathUnescape(p); err == nil {
				names = append(names, n)
			}
		}
	}
	var hs []driver.Holder
	for _, name := range names {
		parent := d.parent(name)
		kids, modes, err := d.holders(ctx, parent)
		if err != nil {
			return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
		}
		// Pipelined on the connection: one round trip for the holders.
		rs := make([]getResult, len(kids))
		errs := make([]error, len(kids))
		var wg sync.WaitGroup
		for i, child := range kids {
			wg.Go(func() {
				rs[i], errs[i] = sessionlock.Call(ctx, func() (getResult, error) {
					data, st, err := d.conn.Get(parent + "/" + child)
					return getResult{data, st}, err
				})
			})
		}
		wg.Wait()
		for i, child := range kids {
			if errs[i] == zk.ErrNoNode {
				continue // released meanwhile
			}
			if errs[i] != nil {
				return nil, fmt.Errorf("zklock: inspect %q: %w", name, errs[i])
			}
			_, owner, _ := parseChild(child)
			hs = append(hs, driver.Holder{Name: name, Owner: owner, Fence: uint64(rs[i].stat.Czxid), Metadata: string(rs[i].data),
				Shared: modes[i].Shared, Limit: modes[i].Limit})
		}
	}
	slices.SortStableFunc(hs, func(a, b driver.Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// Waiters implements driver.WaiterCounter: a name's waiters are the
// children of its queue after those that hold (see package sessionlock's
// Mode). One GetChildren per name, pipelined on the connection: one round
// trip for any number of names.
func (d *zkDriver) Waiters(ctx context.Context, names []string) ([]int, error) {
	counts := make([]int, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			kids, err := d.children(ctx, d.parent(name))
			if err != nil && err != zk.ErrNoNode {
				errs[i] = fmt.Errorf("zklock: waiters %q: %w", name, err)
				return
			}
			_, modes := queueOf(kids)
			counts[i] = sessionlock.Waiting(modes)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return counts, nil
}

// ForceRelease implements driver.ForceReleaser: it deletes every holding
// child, which wakes the waiters they kept out; the holders learn of it
// at their next renewal. Waiting children stay queued.
func (d *zkDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	parent := d.parent(name)
	kids, _, err := d.holders(ctx, parent)
	if err != nil {
		return false, fmt.Errorf("zklock: force release %q: %w", name, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		freed bool
		errs  []error
	)
	for _, child := range kids {
		wg.Go(func() {
			ok, err := d.deleteOwned(ctx, parent+"/"+child)
			mu.Lock()
			defer mu.Unlock()
			freed = freed || ok
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return freed, fmt.Errorf("zklock: force release %q: %w", name, errs[0])
	}
	return freed, nil
}
