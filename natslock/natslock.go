// Package natslock is the dlock backend for NATS JetStream, through a
// key-value bucket (jetstream.KeyValue of github.com/nats-io/nats.go) that
// the user opens on their own connection. Each lock name is one key of
// the bucket; every step is one compare-and-set on its revision.
//
// # Store URLs
//
// Importing the package registers this with dlock.Open:
//
//	nats://[user:pass@]host[:port][,host[:port]]/bucket
//
// with the query parameters prefix (Options.Prefix) and replicas (the
// bucket's replicas when Open creates it; default 1). Open connects,
// opens the bucket, creating it if it does not exist (history 1), and
// makes a Locker that closes the connection.
//
// # Guarantees
//
//   - A name's key holds its holders (owner, lease, fencing token), its
//     semaphore limit and a waiting writer's intent. Acquire, Refresh,
//     Release, Extend, Resume and ForceRelease each read the key and
//     write it back only if its revision is still the one read, so no
//     step acts on a state another has changed.
//   - The fencing token of a hold is the revision of the write that
//     granted it: the stream's sequence, which only grows within the
//     bucket, across deletes and purges of keys and purges of the whole
//     bucket. Deleting the bucket and creating it again starts it over.
//   - No clock but the waiting process's monotonic one decides that a
//     lease ran out: a hold that one Locker saw unchanged (the same
//     renewal revision) for its TTL, plus its lock-delay, is taken out by
//     that Locker's next Acquire. Every renewal writes a new revision, so
//     a live holder is never judged so. The server's clock is in no
//     promise: keys have no server-side TTL.
//   - Waiters are woken by a KV watch on the name's key, one per Locker
//     and name, not by polling alone.
//   - Shared holds (with a waiting writer's intent, so writers do not
//     starve), semaphores, Extend, Resume, lock-delay, Inspect and
//     ForceRelease are all supported.
//
// # Limits
//
//   - If the holder's process dies, a waiter takes the name once it has
//     seen the hold unchanged for its TTL (plus lock-delay) since its
//     first look: between TTL and TTL plus the holder's renewal interval
//     (TTL/3) after the holder's last renewal, for a waiter that was
//     already waiting.
//   - A released name's key stays in the bucket with an empty value, one
//     small message per name ever locked (history 1).
//   - Anyone who can write the bucket can change a holder's key; the
//     holder's Done then closes at its next renewal.
//   - Each request of a step (a read or a write of a key) that gets no
//     reply within 5 s fails the step with an error wrapping
//     nats.ErrTimeout; a stream without a leader fails it with
//     nats.ErrNoResponders, jetstream.ErrNoStreamResponse or a
//     jetstream.APIError with Code 503. During a
//     stream-leader election Acquire returns one of these (a clustered
//     stream answers from its leader alone, and a request the old leader
//     took with it gets no reply); the caller tries again.
//   - Each step is a read and a write: two round trips, or one when the
//     driver last wrote the key itself. Steps on one name of one Locker
//     share writes, but acquisitions of one name are granted one per
//     write: about one per round trip.
package natslock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// DefaultPrefix is the prefix of the keys that hold locks, unless
// Options.Prefix says otherwise.
const DefaultPrefix = "dlock."

// Options configures New. A nil *Options means the defaults.
type Options struct {
	// Prefix is put before each lock's key in the bucket; it must be
	// empty or valid in a key and end with ".". Default: DefaultPrefix.
	Prefix string

	// Locker is passed to dlock.NewLocker. Default: the zero
	// LockerOptions.
	Locker driver.LockerOptions
}

// New returns a Locker whose locks are keys of kv. The bucket must keep
// one revision per key or more (any History). Close on the Locker does
// not close kv's connection.
func New(kv jetstream.KeyValue, opts *Options) (*dlock.Locker, error) {
	d, err := NewDriver(kv, opts)
	if err != nil {
		return nil, err
	}
	var lo driver.LockerOptions
	if opts != nil {
		lo = opts.Locker
	}
	return dlock.NewLocker(d, lo), nil
}

// NewDriver returns the driver New uses, for tests that wrap it before
// passing it to dlock.NewLocker.
func NewDriver(kv jetstream.KeyValue, opts *Options) (driver.Driver, error) {
	if kv == nil {
		return nil, fmt.Errorf("natslock: new: %w: nil KeyValue", dlock.ErrInvalid)
	}
	prefix := DefaultPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if !strings.HasSuffix(prefix, ".") || strings.ContainsAny(prefix, " *>") {
		return nil, fmt.Errorf("natslock: new: %w: prefix %q must end with \".\" and hold no space, * or >", dlock.ErrInvalid, prefix)
	}
	return &natsDriver{kv: kv, prefix: prefix}, nil
}

// The optional interfaces natsDriver implements, checked at compile time.
var (
	_ driver.Notifier       = (*natsDriver)(nil)
	_ driver.ChangeNotifier = (*natsDriver)(nil)
	_ driver.MultiHolder    = (*natsDriver)(nil)
	_ driver.Inspector      = (*natsDriver)(nil)
	_ driver.Extender       = (*natsDriver)(nil)
	_ driver.Resumer        = (*natsDriver)(nil)
	_ driver.LockDelayer    = (*natsDriver)(nil)
	_ driver.ForceReleaser  = (*natsDriver)(nil)
	_ driver.Classifier     = (*natsDriver)(nil)
	_ driver.Describer      = (*natsDriver)(nil)
)

type natsDriver struct {
	kv      jetstream.KeyValue
	prefix  string
	seen    book
	lines   lines
	onClose func() // closes the connection Open made; nil for New
	errorKinds
}

// Acquire implements driver.Driver.
func (d *natsDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	var res driver.Result
	var (
		mine int    // index of l's hold in the state written, or -1
		kept uint64 // the token of a hold l.Owner had already
	)
	step := func(st *state, rev uint64) (bool, error) {
		res, kept = driver.Result{}, 0
		ages := d.seen.note(l.Name, st, time.Now())
		pruned := prune(st, ages)
		if mine = st.find(l.Owner); mine >= 0 {
			kept = st.Holders[mine].Fence
			st.Holders[mine].renew(l) // a retry whose reply was lost
			return true, nil
		}
		if len(st.Holders) > 0 && st.Limit != l.Limit {
			return false, fmt.Errorf("natslock: acquire %q as %s: held as %s: %w", l.Name, mode(l.Limit), mode(st.Limit), driver.ErrMode)
		}
		if in := st.blockers(l); len(in) > 0 {
			res.Remaining = in[0].life()
			for _, h := range in {
				res.Remaining = min(res.Remaining, max(left(h, ages), time.Millisecond))
			}
			mine = -1
			if l.Waiting && !l.Shared && l.Limit == 0 && st.Holders[0].Shared && (st.Intent == nil || st.Intent.Owner == l.Owner) {
				// A writer waits behind readers: later readers wait for it.
				st.Intent = &holder{Owner: l.Owner, TTL: l.TTL.Milliseconds()}
				res.Queued = true
				return true, nil
			}
			return pruned, nil
		}
		if st.Intent != nil && st.Intent.Owner == l.Owner {
			st.Intent = nil
		}
		st.Limit = l.Limit
		st.Holders = append(st.Holders, newHolder(l))
		mine = len(st.Holders) - 1
		return true, nil
	}
	var fence uint64
	var acquired bool
	err := d.change(ctx, l.Name, step, func(rev uint64) {
		acquired = mine >= 0
		if fence = kept; fence == 0 {
			fence = rev
		}
	})
	if err != nil {
		return driver.Result{}, d.fail("acquire", l.Name, err)
	}
	if acquired {
		return driver.Result{Acquired: true, Fence: fence}, nil
	}
	return res, nil
}
