package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// parseKey returns the mode and owner of a lock's key: the part after the
// last '/' is the mode's tag and the owner (neither contains '/').
func (d *etcdDriver) parseKey(key []byte) (sessionlock.Mode, string) {
	k := string(key)
	return sessionlock.ParseTag(k[strings.LastIndexByte(k, '/')+1:])
}

// holding returns, for every name among kvs (keys under d.prefix sorted by
// create revision), the keys that hold it by the queue's rule
// (sessionlock.Holding), in queue order, with their modes. names, if not
// empty, restricts the names returned.
func (d *etcdDriver) holding(kvs []*mvccpb.KeyValue, names []string) map[string][]holdingKey {
	queues := make(map[string][]holdingKey)
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), d.prefix)
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			continue
		}
		name, err := url.PathUnescape(rest[:i])
		if err != nil || (len(names) > 0 && !slices.Contains(names, name)) {
			continue
		}
		m, owner := d.parseKey(kv.Key)
		queues[name] = append(queues[name], holdingKey{kv: kv, mode: m, owner: owner})
	}
	for name, q := range queues {
		modes := make([]sessionlock.Mode, len(q))
		for i, h := range q {
			modes[i] = h.mode
		}
		queues[name] = q[:sessionlock.Holding(modes)]
	}
	return queues
}

type holdingKey struct {
	kv    *mvccpb.KeyValue
	mode  sessionlock.Mode
	owner string
}

// queueKeys reads the keys of name, or of every name if name is "",
// sorted by create revision.
func (d *etcdDriver) queueKeys(ctx context.Context, name string) ([]*mvccpb.KeyValue, error) {
	prefix := d.prefix
	if name != "" {
		prefix = Key(d.prefix, name)
	}
	resp, err := d.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// Inspect implements driver.Inspector: the holders of a name are the keys
// at the head of its queue that hold by the queue's rule (see package
// sessionlock's Mode). A holder's Remaining is the time to live of its
// key's lease (its Locker's session), in whole seconds, as the server
// counts it: one LeaseTimeToLive per distinct lease among the holders.
// It is 0 (unknown) for a lease that expired since the read. A holder
// whose key is in its lock-delay is Delayed (see LockDelay); a resumed
// one's Owner and Metadata are those its key's value names.
func (d *etcdDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	one := ""
	if len(names) == 1 {
		one = names[0]
	}
	kvs, err := d.queueKeys(ctx, one)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: inspect: %w", err)
	}
	left := make(map[int64]time.Duration)
	var hs []driver.Holder
	for name, q := range d.holding(kvs, names) {
		for _, h := range q {
			remaining, ok := left[h.kv.Lease]
			if !ok {
				if remaining, err = d.leaseLeft(ctx, h.kv.Lease); err != nil {
					return nil, fmt.Errorf("etcdlock: inspect %q: %w", name, err)
				}
				left[h.kv.Lease] = remaining
			}
			v := decodeValue(h.owner, h.kv.Value)
			hs = append(hs, driver.Holder{Name: name, Owner: v.owner, Fence: uint64(h.kv.CreateRevision), Metadata: v.metadata,
				Remaining: remaining, Shared: h.mode.Shared, Limit: h.mode.Limit, Delayed: delayed(v, remaining)})
		}
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Fence, b.Fence)
	})
	return hs, nil
}

// leaseLeft returns the time to live of lease id on the server, or 0 for
// no lease (a key without one) or one already expired.
func (d *etcdDriver) leaseLeft(ctx context.Context, id int64) (time.Duration, error) {
	if id == 0 {
		return 0, nil
	}
	resp, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("lease time to live: %w", err)
	}
	return time.Duration(max(resp.TTL, 0)) * time.Second, nil
}

// Waiters implements driver.WaiterCounter: a name's waiters are the keys
// of its queue after those that hold (see package sessionlock's Mode).
// The names' keys (without their values) are read in one transaction per
// maxTxnOps names: one round trip for up to that many.
func (d *etcdDriver) Waiters(ctx context.Context, names []string) ([]int, error) {
	counts := make([]int, 0, len(names))
	for chunk := range slices.Chunk(names, maxTxnOps) {
		ops := make([]clientv3.Op, len(chunk))
		for i, name := range chunk {
			ops[i] = clientv3.OpGet(Key(d.prefix, name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		}
		resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcdlock: waiters: %w", err)
		}
		for _, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			modes := make([]sessionlock.Mode, len(kvs))
			for i, kv := range kvs {
				modes[i], _ = d.parseKey(kv.Key)
			}
			counts = append(counts, sessionlock.Waiting(modes))
		}
	}
	return counts, nil
}

// ForceRelease implements driver.ForceReleaser: it deletes every holder's
// key (if it is still the same acquisition), in one transaction, which
// wakes the waiters they kept out; the holders learn of it at their next
// renewal. Waiting keys stay queued.
func (d *etcdDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	kvs, err := d.queueKeys(ctx, name)
	if err != nil {
		return false, fmt.Errorf("etcdlock: force release %q: %w", name, err)
	}
	q := d.holding(kvs, []string{name})[name]
	if len(q) == 0 {
		return false, nil
	}
	freed := false
	for chunk := range slices.Chunk(q, maxTxnOps) {
		var ops []clientv3.Op
		for _, h := range chunk {
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(string(h.kv.Key)), "=", h.kv.CreateRevision)},
				[]clientv3.Op{clientv3.OpDelete(string(h.kv.Key))}, nil))
		}
		resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return freed, fmt.Errorf("etcdlock: force release %q: %w", name, err)
		}
		for _, r := range resp.Responses {
			if t := r.GetResponseTxn(); t != nil && t.Succeeded {
				freed = true
			}
		}
	}
	return freed, nil
}
