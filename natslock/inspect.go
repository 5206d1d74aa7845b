package natslock

import (
	"context"
	"slices"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Inspect implements driver.Inspector. Remaining is what is left of a
// hold's life (TTL plus lock-delay) since its last renewal, and Delayed
// marks a hold past its TTL, in its lock-delay. Both are for people and
// tools only, and no step relies on them: the time since the renewal is
// the longer of how long this driver has seen the hold unchanged and,
// when the renewal is the key's last write, how long ago the server
// stamped that write, by this host's wall clock against the server's.
func (d *natsDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	if len(names) == 0 {
		var err error
		if names, err = d.names(ctx); err != nil {
			return nil, d.fail("inspect", "", err)
		}
	}
	var hs []driver.Holder
	for _, n := range names {
		st, rev, written, err := d.readAt(ctx, n)
		if err != nil {
			return nil, d.fail("inspect", n, err)
		}
		ages := d.seen.note(n, &st, time.Now())
		for _, h := range st.Holders {
			rest := left(h, ages)
			if h.Rev == rev {
				rest = min(rest, max(h.life()-time.Since(written), 0))
			}
			if rest == 0 {
				continue // given up by its holder
			}
			hs = append(hs, driver.Holder{Name: n, Owner: h.Owner, Fence: h.Fence, Remaining: rest, Metadata: h.Metadata,
				Shared: h.Shared, Limit: st.Limit, Delayed: h.Delay > 0 && rest <= time.Duration(h.Delay)*time.Millisecond})
		}
	}
	return hs, nil
}

// names returns the lock names that have a key in the bucket, sorted.
func (d *natsDriver) names(ctx context.Context) ([]string, error) {
	lister, err := d.kv.ListKeysFiltered(ctx, d.prefix+">")
	if err != nil {
		return nil, err
	}
	defer lister.Stop()
	var names []string
	for k := range lister.Keys() {
		if n, ok := d.name(k); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, ctx.Err()
}
