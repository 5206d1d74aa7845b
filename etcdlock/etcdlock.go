// Package etcdlock is the dlock backend for etcd v3, through the user's own
// *clientv3.Client (go.etcd.io/etcd/client/v3, v3.5). It uses only the v3 API
// that etcd servers from 3.4 on serve: transactions, leases, and watches from
// a revision.
//
// # Store URLs
//
// Importing the package registers these with dlock.Open:
//
//	etcd://[user:pass@]host[:port][,host[:port]][/prefix]
//	etcds://...                                   (TLS)
//
// with the query parameters session_ttl (Options.SessionTTL, a Go
// duration), compact_every (Options.CompactEvery, a Go duration; 0 is off)
// and the TLS parameters of backend.TLSParams (tls_ca, tls_cert and tls_key
// for a server with --client-cert-auth, tls_server_name,
// tls_insecure_skip_verify=true only when named; any of them makes etcd://
// speak TLS too). With authentication on, the user is the URL's, or else
// the client certificate's common name. Open grants a session lease (the
// one for driver.DefaultTTL) before it returns.
//
// # Guarantees
//
//   - Every acquisition, held or waiting, is a key attached to one of the
//     Locker's etcd leases (sessions): the one whose TTL is the
//     acquisition's TTL rounded up to whole seconds, shared by every
//     acquisition of that TTL, or the single one of Options.SessionTTL if
//     set. The keys of a name, of every mode, form one queue ordered
//     by create revision, so waiters are served in arrival order and a
//     writer is never overtaken by readers that come after it.
//   - A waiter waits only for the keys whose deletion may let it in: a
//     release of an exclusive lock wakes exactly one waiter. A Locker's
//     waiters on one name share one watch, and a handoff costs the same
//     requests, and the same keys read by the server, whatever the
//     number of waiters.
//   - The fencing token is the holder's key's create revision, which
//     strictly increases across the cluster.
//   - No wall clock, on either side, is part of any promise: a step of a
//     server's clock ends no lease early, nor any lock-delay.
//   - A late or retried release never deletes a newer lock, and a waiter
//     that reaches the head checks that its key is still attached to its
//     lease.
//   - Per name, nothing stays on the server once it is released.
//
// # Limits
//
//   - If the holder's process dies, the next waiter gets the lock when
//     the lease of the holder's key expires: after the lock's TTL rounded
//     up to whole seconds, and at least 2 s (etcd's own minimum with its
//     default timing; a server may raise it further), or after
//     Options.SessionTTL if set. Every lock of a session is lost when its
//     lease is found revoked or expired; the locks of other TTLs are not.
//   - A Locker keeps one lease, and one keep-alive loop, per distinct TTL
//     it holds or waits with; a lease with no key attached is revoked
//     within about its TTL.
//   - Each acquisition makes two revisions, which etcd keeps until its
//     history is compacted (see below).
//   - Anyone with write access to the prefix can delete a holder's key; the
//     holder's Done then closes at its next renewal. Owner strings are part
//     of key names, readable by anyone who can read the prefix.
//
// # Resume, Extend, lock-delay and IsOwner
//
// A hold's key cannot be renamed without a new create revision (the
// fencing token), so these put the same key again:
//
//   - Locker.Resume is one transaction (one round trip) that puts the key
//     with a value naming the new owner on the resuming Locker's session
//     lease of the TTL, if it is still the first owner's and was never
//     put again; a hold resumed or extended before costs two (a read by
//     create revision, then a put compared by mod revision). The first
//     holder's next renewal finds its key on another lease (ErrNotHeld);
//     its Release and its expiry delete nothing.
//   - Lock.Extend is one transaction that puts the key, value unchanged,
//     on the session lease of the new TTL, if the key is still on the
//     holder's; plus a lease grant if the Locker holds nothing of that
//     TTL yet.
//   - dlock.WithLockDelay: the key is attached to a session lease of
//     1.5×(TTL+delay)+2 s, so that a holder that dies or is cut off keeps
//     the name at least TTL+delay after its loss deadline, and at most
//     that whole lease after its last keep-alive (a killed holder with a
//     1 s TTL and a 3 s delay: its name was taken again 8 s after the
//     kill). A lease that runs out in a live process (not renewed, or
//     its session lost) moves its key to a lease of the delay that
//     nobody renews, marked delayed (a grant and a transaction). Inspect
//     shows a holder Delayed when so marked or when its lease has less
//     than the delay left. These run on etcd's lease clock: the leader's
//     Go time.Now() with its monotonic reading, no wall clock, every
//     lease renewed in full when a new leader takes over (which only
//     lengthens a delay).
//   - IsOwner gives a compare for the user's own transactions that holds
//     while the lock's key is as its holder last put it.
//
// The value of a key with a lock-delay or a resumed one names its owner
// and delay after a NUL byte (metadata has none); Inspect reads them.
//
// # History, compaction and space
//
// etcd keeps every revision until it is compacted, and does not compact by
// default. A cluster serving A acquisitions a second gains 120*A revisions a
// minute, about 190 bytes of database each on etcd 3.4 (1.9 MB per 10,000;
// BenchmarkHistory), until the quota (--quota-backend-bytes, 2 GB by
// default) is full: then Acquire fails at once with an error wrapping
// dlock.ErrNoSpace, while held locks still refresh and release. Run etcd with
// --auto-compaction-mode=periodic --auto-compaction-retention=5m, or, where
// the server's flags are not the application's to set, set
// Options.CompactEvery (compact_every=5m): the Locker then compacts the
// whole cluster's history, every user's, to the revision it read one
// period earlier. Compaction frees space for reuse; etcdctl defrag returns
// it to the disk.
//
// # Access control
//
// A Locker needs read and write on its prefix's key range and nothing else
// (leases need no permission of their own in etcd 3.4):
//
//	etcdctl role add locker
//	etcdctl role grant-permission locker readwrite --prefix=true dlock/
//	etcdctl user grant-role USER locker
//
// etcd's refusals (a wrong user or password, a missing permission, a
// certificate the server refuses) get errors wrapping dlock.ErrDenied, at
// once.
//
// # Example
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
//	if err != nil {
//		return err
//	}
//	locker, err := etcdlock.New(cli, nil) // close the Locker before cli
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "scheduler")
//
// Fence keeps values in etcd that a stale lock holder cannot overwrite
// (see package fence).
//
// Design: the keys and the queue, fencing tokens, leases, TTLs and sessions,
// what stays on the server, history and compaction in full, and access
// control are described in DESIGN.md in this package's directory
// (etcdlock/DESIGN.md).
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "dlock/"

	// DefaultSessionTTL was Options.SessionTTL's default.
	//
	// Deprecated: SessionTTL's default is now 0, a lease per lock TTL, so
	// that a dead holder's lock frees after its own TTL. Set SessionTTL to
	// DefaultSessionTTL for the former behaviour.
	DefaultSessionTTL = 10 * time.Second
)

// Options configures an etcd Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every key dlock uses. Default: DefaultPrefix.
	Prefix string

	// SessionTTL, if positive, makes every acquisition of the Locker use
	// one etcd lease of this TTL, rounded up to whole seconds; the server
	// may raise it to its minimum (about 1.5 election timeouts). A holder
	// that dies then keeps its locks this long, whatever their TTLs. If
	// 0, each acquisition uses the lease of its own TTL, rounded up to
	// whole seconds (one lease per distinct TTL), and a dead holder's lock
	// frees after its TTL. Default: 0, a lease per TTL.
	SessionTTL time.Duration

	// CompactEvery, if positive, makes the Locker compact the cluster's
	// history every CompactEvery, to the revision it read one CompactEvery
	// earlier (logically, as etcdctl compact does without --physical), as
	// etcd's own --auto-compaction-mode=periodic does: history younger
	// than CompactEvery is always kept. Compaction is cluster-wide: a
	// watch of any user of the cluster that starts or resumes from a
	// revision older than the compaction fails with ErrCompacted, and a
	// read at such a revision too; watches that are running are not
	// affected. Several Lockers doing it is harmless (each compaction is
	// idempotent; one that another already took further is ignored), but
	// costs one compaction request per Locker per period: one Locker, or
	// the server's own flag, is enough. See the package doc's "History,
	// compaction and space". Default: 0, off.
	CompactEvery time.Duration

	// MaxRetryInterval bounds how long dlock waits between attempts when
	// no wake-up arrives. Waiters on etcd are woken by watches, so this
	// matters little. Default: driver.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the etcd cluster behind cli. The Locker does
// not close cli; close the Locker first. A nil opts means defaults. A nil
// cli or a negative SessionTTL or CompactEvery gets an error wrapping
// dlock.ErrInvalid. New makes no request: the session lease of a TTL is
// granted by the first acquisition with that TTL, within that call's
// context (and a
// CompactEvery loop makes its first one a period later).
func New(cli *clientv3.Client, opts *Options) (*dlock.Locker, error) {
	l, _, err := newLocker(cli, opts)
	return l, err
}

// newLocker is New, also returning the driver under the Locker (for the
// test hook).
func newLocker(cli *clientv3.Client, opts *Options) (*dlock.Locker, *etcdDriver, error) {
	d, lopts, err := newDriver(cli, opts, false)
	if err != nil {
		return nil, nil, err
	}
	return dlock.NewLocker(d, lopts), d, nil
}

// newDriver validates opts and returns the driver and the Locker's
// options; with ownClient set (Open made cli) the driver's Close
// closes cli.
func newDriver(cli *clientv3.Client, opts *Options, ownClient bool) (*etcdDriver, driver.LockerOptions, error) {
	if cli == nil {
		return nil, driver.LockerOptions{}, fmt.Errorf("etcdlock: new: nil *clientv3.Client: %w", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SessionTTL < 0 {
		return nil, driver.LockerOptions{}, fmt.Errorf("etcdlock: new: negative SessionTTL %v: %w", o.SessionTTL, dlock.ErrInvalid)
	}
	if o.CompactEvery < 0 {
		return nil, driver.LockerOptions{}, fmt.Errorf("etcdlock: new: negative CompactEvery %v: %w", o.CompactEvery, dlock.ErrInvalid)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &etcdDriver{
		cli:        cli,
		ownClient:  ownClient,
		prefix:     o.Prefix,
		sessionTTL: ceilSeconds(o.SessionTTL),
		sessions:   make(map[int64]*session),
		views:      views{slots: make(map[string]*viewSlot)},
		ctx:        ctx,
		cancel:     cancel,
	}
	d.leases = sessionlock.New(sessionlock.Config[entry]{
		Name:   "etcdlock",
		Remove: d.remove,
		Live:   func(e entry) bool { return !e.sess.dead.Load() },
	})
	register(d)
	if o.CompactEvery > 0 {
		d.bg.Add(1)
		go d.compactLoop(o.CompactEvery) // exits at Close
	}
	return d, driver.LockerOptions{MaxRetryInterval: o.MaxRetryInterval}, nil
}

// Key returns the prefix under which the holder and waiter keys of the
// lock on name live, for prefix ("" means DefaultPrefix): prefix + name
// with '%' and '/' written as %25 and %2F, + "/". Each acquisition's key
// is Key(prefix, name) + its mode's tag + its owner string (see the
// package doc). Deleting the keys under it
// ends the lock, as an administrator might.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + escaper.Replace(name) + "/"
}

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// etcdDriver implements driver.Driver, Queuer, LossReporter, Inspector,
// ForceReleaser, MultiHolder, ChangeNotifier, Classifier, Extender,
// Resumer and LockDelayer.
type etcdDriver struct {
	errorKinds // Classify
	cli        *clientv3.Client
	ownClient  bool // made by Open: Close closes it
	prefix     string
	sessionTTL int64 // seconds; 0: a session per acquisition TTL

	ctx    context.Context // cancelled by Close; bounds background calls
	cancel context.CancelFunc
	leases *sessionlock.Leases[entry]
	bg     sync.WaitGroup // keep-alive loops, the compaction loop

	mu       sync.Mutex
	closed   bool
	sessions map[int64]*session // the live sessions, by session.secs

	views views // the queues this Locker's waiters wait in
}

// entry is an acquisition's key: its create revision (the fencing token)
// and the session it is attached to (nil for an orphan).
type entry struct {
	key  string
	rev  int64
	sess *session
	// mod is the key's mod revision when the driver put it again
	// (Extend, Resume); 0 means rev (put once).
	mod int64
	// delay is the acquisition's lock-delay, and val, when delay is set,
	// the key's value (marked: see holdValue).
	delay time.Duration
	val   string
	// ahead is, for an entry Join put, how many keys were ahead of it
	// then (-1 unknown), for driver.Result.Ahead; 0 for others.
	ahead int
	// owner is set, with key alone, for an orphan whose revision is not
	// known (see releaseUnheld): key is deleted if owner still holds it.
	owner string
}

var _ sessionlock.Driver = (*etcdDriver)(nil)

// key returns l's key: the name's prefix, l's mode's tag, its owner.
func (d *etcdDriver) key(l driver.Lease) string {
	return Key(d.prefix, l.Name) + sessionlock.ModeOf(l).Tag() + l.Owner
}

// Backend names the store for hooks.
func (d *etcdDriver) Backend() string { return "etcd" }

func (d *etcdDriver) Close() error {
	unregister(d)
	es := d.leases.Close()
	d.mu.Lock()
	d.closed = true
	live := d.sessions
	d.sessions = nil
	d.mu.Unlock()
	d.cancel() // stops the keep-alive and compaction loops
	d.bg.Wait()
	d.leases.Wait()

	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	for _, e := range es {
		if e.delay > 0 {
			d.startDelay(ctx, e) // off its session before the revoke below
		}
	}
	var errs []error
	for _, s := range live {
		// Revoking a session deletes every key still attached to it.
		if _, err := d.cli.Revoke(ctx, s.id); err != nil {
			errs = append(errs, fmt.Errorf("etcdlock: close: revoke lease %x: %w", s.id, err))
		}
	}
	for _, e := range es {
		switch {
		case e.owner != "":
			d.deleteIfOwner(ctx, e.key, e.owner)
		case e.delay == 0 && (e.sess == nil || live[e.sess.secs] != e.sess):
			d.deleteEntry(ctx, e)
		}
	}
	if d.ownClient {
		d.cli.Close()
	}
	return errors.Join(errs...)
}
