package etcdlock

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// Inspect implements driver.Inspector: the holder of a name is its key
// with the lowest create revision. The store keeps no lease deadline per
// lock, so Remaining is 0 (unknown).
func (d *etcdDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	prefix := d.prefix
	if len(names) == 1 {
		prefix = Key(d.prefix, names[0])
	}
	resp, err := d.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: inspect: %w", err)
	}
	var hs []driver.Holder
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), d.prefix)
		esc, owner, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		name, err := url.PathUnescape(esc)
		if err != nil || seen[name] || (len(names) > 0 && !slices.Contains(names, name)) {
			continue
		}
		seen[name] = true // the first key by create revision holds the lock
		hs = append(hs, driver.Holder{Name: name, Owner: owner, Fence: uint64(kv.CreateRevision), Metadata: string(kv.Value)})
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// ForceRelease implements driver.ForceReleaser: it deletes the holder's
// key (if it is still the same acquisition), which wakes the next waiter;
// the holder learns of it at its next renewal.
func (d *etcdDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	resp, err := d.cli.Get(ctx, Key(d.prefix, name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return false, fmt.Errorf("etcdlock: force release %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	kv := resp.Kvs[0]
	ok, err := d.deleteKey(ctx, string(kv.Key), kv.CreateRevision)
	if err != nil {
		return false, fmt.Errorf("etcdlock: force release %q: %w", name, err)
	}
	return ok, nil
}
