package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactTimeout bounds each request of the compaction loop, when
// Options.CompactEvery is longer.
const compactTimeout = 10 * time.Second

// compactLoop is the Locker's compaction (Options.CompactEvery): every
// period it reads the store's revision, and compacts the history to the
// revision it read one period earlier, so history younger than one
// period is always kept. It starts one period after New and exits when
// the driver closes (d.ctx ends). A failed step is skipped and tried
// again a period later: the library never logs, and a compaction that
// another client already took further (ErrCompacted) is no failure.
func (d *etcdDriver) compactLoop(every time.Duration) {
	defer d.bg.Done()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var safe int64 // the revision read one period ago, 0 if unknown
	for {
		select {
		case <-ticker.C:
		case <-d.ctx.Done():
			return
		}
		rev := d.currentRevision(every)
		if safe > 0 {
			d.compact(safe, every)
		}
		safe = rev
	}
}

// currentRevision returns the store's revision, read with a count of the
// keys under the prefix (a read the Locker's role grants), or 0 if the
// read fails.
func (d *etcdDriver) currentRevision(every time.Duration) int64 {
	ctx, cancel := context.WithTimeout(d.ctx, min(every, compactTimeout))
	defer cancel()
	resp, err := d.cli.Get(ctx, d.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0
	}
	return resp.Header.Revision
}

// compact compacts the store's history up to rev, logically (etcd frees
// the space in the background; physical=false does not wait for it). A
// store whose history starts later already (ErrCompacted) needs nothing;
// any other failure leaves the work to the next period.
func (d *etcdDriver) compact(rev int64, every time.Duration) {
	ctx, cancel := context.WithTimeout(d.ctx, min(every, compactTimeout))
	defer cancel()
	d.cli.Compact(ctx, rev) // the error, ErrCompacted or not, changes nothing here
}
