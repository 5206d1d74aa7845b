package zklock

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// holder returns the holding child of the lock whose parent znode is
// parent (the child with the lowest sequence number), or "" if none.
func (d *zkDriver) holder(ctx context.Context, parent string) (string, error) {
	kids, err := d.children(ctx, parent)
	if err != nil && err != zk.ErrNoNode {
		return "", err
	}
	kids = slices.DeleteFunc(kids, func(k string) bool { return len(k) <= seqLen })
	if len(kids) == 0 {
		return "", nil
	}
	return slices.MinFunc(kids, bySeq), nil
}

type getResult struct {
	data []byte
	stat *zk.Stat
}

// Inspect implements driver.Inspector: a lock's holder is its child with
// the lowest sequence number; the child's data is the holder's metadata
// and its czxid the fencing token. Leases are kept by the holder's
// driver, so Remaining is 0 (unknown).
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
		child, err := d.holder(ctx, parent)
		if err != nil {
			return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
		}
		if child == "" {
			continue
		}
		r, err := sessionlock.Call(ctx, func() (getResult, error) {
			data, st, err := d.conn.Get(parent + "/" + child)
			return getResult{data, st}, err
		})
		if err == zk.ErrNoNode {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
		}
		owner := child[:len(child)-seqLen-1]
		hs = append(hs, driver.Holder{Name: name, Owner: owner, Fence: uint64(r.stat.Czxid), Metadata: string(r.data)})
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// ForceRelease implements driver.ForceReleaser: it deletes the holding
// child, which wakes the next waiter; the holder learns of it at its next
// renewal.
func (d *zkDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	parent := d.parent(name)
	child, err := d.holder(ctx, parent)
	if err != nil || child == "" {
		return false, err
	}
	_, err = sessionlock.Call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(parent+"/"+child, -1) })
	switch {
	case err == zk.ErrNoNode:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("zklock: force release %q: %w", name, err)
	}
	return true, nil
}
