package etcdlock

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
)

// drivers are the open drivers of this process, for IsOwner.
var drivers struct {
	mu  sync.Mutex
	all map[*etcdDriver]struct{}
}

func register(d *etcdDriver) {
	drivers.mu.Lock()
	defer drivers.mu.Unlock()
	if drivers.all == nil {
		drivers.all = make(map[*etcdDriver]struct{})
	}
	drivers.all[d] = struct{}{}
}

func unregister(d *etcdDriver) {
	drivers.mu.Lock()
	defer drivers.mu.Unlock()
	delete(drivers.all, d)
}

// notOwner is the key of the compare IsOwner returns for a lock it does
// not know: no key has a negative version, so it never holds.
const notOwner = "\x00etcdlock: not an etcdlock lock held in this process"

// IsOwner returns a compare that holds while k still holds its lock on
// the server, for the user's own transactions, as etcd's Mutex.IsOwner
// does: put it in a Txn's If, and the Then ops apply only if k's key
// still exists as k put it last (its mod revision: same create
// revision, hence fencing token, not resumed by another owner, not
// moved to its lock-delay, not deleted by a release, an expiry or an
// administrator), all in the one revision the transaction sees.
//
// k must have been acquired or resumed by a Locker of this package in
// this process; call IsOwner for each transaction (Lock.Extend puts the
// key again, which a compare made before it no longer matches). For a
// nil k, one that is released or lost in this process, or one of another
// backend, the compare never holds. The compare is on the key itself,
// so the transaction must run on the etcd cluster of k's Locker, with
// no namespace of its own (clientv3/namespace would prefix the key).
func IsOwner(k *dlock.Lock) clientv3.Cmp {
	if k != nil {
		drivers.mu.Lock()
		defer drivers.mu.Unlock()
		for d := range drivers.all {
			if e, fence, ok := d.leases.Held(k.Owner()); ok && fence == k.Fence() {
				return clientv3.Compare(clientv3.ModRevision(e.key), "=", max(e.mod, e.rev))
			}
		}
	}
	return clientv3.Compare(clientv3.Version(notOwner), "<", 0)
}
