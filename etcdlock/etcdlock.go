// Package etcdlock is the dlock backend for etcd v3, through the user's own
// *clientv3.Client (go.etcd.io/etcd/client/v3, v3.5). It uses only the
// v3 API that etcd servers from 3.4 on serve: transactions, leases, and
// watches from a revision.
//
// # Keys and waiting
//
// Each Locker grants one etcd lease (its session) and keeps it alive
// itself. Every acquisition, held or waiting, is a key attached to that
// lease: Key(Prefix, name) + tag + owner, where the tag records the
// acquisition's mode: "" for an exclusive hold (a mutex's keys are named
// as before), "S." for a shared one (dlock.Shared), "P<n>." for a permit
// of a semaphore of n (dlock.WithLimit). The keys of a name, of every
// mode, form one queue ordered by create revision, and every client
// applies the same rule to one read of the keys just before its own (as
// Curator's InterProcessReadWriteLock and InterProcessSemaphoreV2 do): an
// exclusive key holds when it is first; a shared key when no exclusive
// key is before it; a permit when it is among the first n. A waiter
// watches only the keys whose deletion may let it in: an exclusive one
// the key just before it, so a release wakes exactly one waiter; a shared
// one the nearest exclusive key before it; a permit the n keys just
// before it. Waiters are served in arrival order, and a writer that waits
// is never overtaken by readers that come after it: they queue behind
// it. A key of another kind among those read (a lock against a
// semaphore, or another limit) makes Acquire fail with an error wrapping
// dlock.ErrInvalid at once, after deleting its key. A waiter that gives
// up deletes its key before returning. Before a waiter that reached the head
// returns, it reads its own key again, checking that it still exists and
// is still attached to its lease (the hole of etcd's Mutex fixed by etcd
// PR 11408).
//
// Keys are created with a transaction that puts the key only if it does
// not exist, so a retried create whose reply was lost finds its key again;
// and they are deleted only if their create revision is the acquisition's,
// so a late or retried release never deletes a newer lock (etcd issue
// 22082).
//
// # Fencing tokens
//
// The token is the holder's key's create revision. Revisions are global
// to the cluster and strictly increase, and a key holds only once every
// key created before it holds or is gone, so tokens strictly increase in
// the order holds become possible, shared holds and permits included: a
// writer's token is above every earlier reader's.
//
// Leases run on the session and the driver's monotonic clock, never on a
// wall clock, so a step of the server's clock ends none early: the
// driver never sets Result.Stamp. A lease's owner string names one
// acquisition and the driver keeps one key for it at a time, whose
// create revision is the token; Refresh checks that key, and when
// Lease.Fence is set also that it is this token (a compare in the
// driver's own table, no extra request), so a token that is no longer
// the owner's is refused even if the owner holds the name through a
// later key.
//
// The server's side needs no wall clock either: etcd's lessor sets a
// lease's expiry with Go's time.Now() plus its TTL and compares it with
// time.Now(), both carrying Go's monotonic reading (which a step of the
// wall clock does not move); it persists only a lease's TTL (and, with
// checkpoints, its remaining TTL), never a wall-clock deadline, and a new
// leader renews every lease in full. So the fault suite steps no etcd
// clock. Tokens are create revisions, a counter.
//
// Inspect reports every key that holds, with its mode; ForceRelease
// deletes them all (not the waiters'), and Locker.Observe is pushed by a
// watch on the name's keys.
//
// # Leases, TTLs and sessions
//
// WithTTL maps onto a deadline the driver keeps for each acquisition: if
// the lock is not refreshed (renewed by dlock, or Lock.Refresh) within its
// TTL, the driver deletes the key itself. The deadline is the TTL from
// the send time of the request that last found the key in place (the read
// that found it at the head of the queue, then each refresh), and the
// core, which measures from that moment or an earlier one, closes the
// holder's Done a tenth of the TTL before it. So a WithoutRenewal lock
// ends after its TTL while the session lives on, and a renewed lock is
// held as long as it is renewed.
//
// The session lease is granted by the first acquisition (dlock.Open
// grants it before it returns), lasts Options.SessionTTL, and is renewed
// every third of it.
// If the holder's process dies, its keys go when the server expires the
// lease: the next waiter gets the lock after SessionTTL, not after the
// lock's TTL. Every lock held through a session is lost (its Done closes)
// when the lease is found revoked or expired, or a tenth of SessionTTL
// before the lease can expire on the server, counted from the send time of
// the last keep-alive the server acknowledged. The Locker then revokes
// that lease (deleting its keys) and grants a new one for later
// acquisitions.
//
// # What stays on the server
//
// Per name: nothing once it is released. A lock's keys (one per holder or
// waiter) are deleted by Release, by a waiter that gives up, by Close,
// and by the server with their session lease: a holder that dies without
// Close keeps them for its SessionTTL at most. There is no counter per
// name: tokens are create revisions. Per Locker: one lease while it is
// open (revoked by Close, expired by the server SessionTTL after its
// process dies). Per waiter: one watch (up to n for a permit of n) while
// it waits, cancelled when the wait ends however it ends; per
// Locker.Observe, one watch until it stops. What does grow
// is the history of revisions, below.
//
// # History, compaction and space
//
// etcd keeps every revision of every key until the history is compacted,
// and does not compact by default. Each acquisition, of any mode, queued
// or not, makes two revisions: the put of its key and its delete; so does
// a TryAcquire that fails (it joins the queue, then leaves it, and so
// never overtakes a waiter) and a wait given up. Renewals make none (a
// read and the lease's keep-alive); Close makes one per lock it held.
// So a cluster serving A acquisitions a second gains 120*A revisions a
// minute, and on etcd 3.4 its database grows by about 190 bytes per
// acquisition (1.9 MB per 10,000; measured by BenchmarkHistory), until it
// reaches its quota (--quota-backend-bytes, 2 GB by default). Then etcd
// raises the NOSPACE alarm and refuses every put and lease grant:
// Acquire fails at once with an error wrapping dlock.ErrNoSpace and
// etcd's own ("etcdserver: mvcc: database space exceeded"). Locks held
// then keep working: refreshes are reads, Release a delete and the
// session's keep-alive is no write, all of which etcd still serves.
// Recovering needs an operator: compact, defragment (etcdctl defrag),
// then etcdctl alarm disarm.
//
// A cluster that serves locks therefore needs compaction. Either run etcd
// with --auto-compaction-mode=periodic --auto-compaction-retention=5m
// (history younger than the retention is kept; choose it longer than any
// client's watch may lag behind, and small enough that 120*A*M revisions
// of about 100 bytes each, for a retention of M minutes, fit well within
// the quota), or
// --auto-compaction-mode=revision --auto-compaction-retention=N (keep the
// last N revisions; etcd 3.4 applies it every 5 minutes, so up to
// N + 600*A revisions are kept). Compaction frees space inside the
// database file for reuse, so its size stops growing; it does not shrink
// the file: defragmentation (etcdctl defrag, one member at a time, which
// blocks that member while it runs) returns the space to the disk.
//
// Where the server's flags are not the application's to set,
// Options.CompactEvery (compact_every= in a store URL) makes the Locker
// compact as the periodic mode would: every period, to the revision it
// read one period earlier. Compaction is cluster-wide, not limited to the
// Locker's prefix, and etcd 3.4 lets any authenticated user do it (a
// user whose role grants only the lock prefix can; tested): every
// other user of the cluster loses the history older than one period, so a
// watch of theirs that starts or resumes from an older revision fails
// with ErrCompacted (and must read again at the current revision, as
// Kubernetes' and etcd's own clients do), and so does a read at such a
// revision; watches that are running are not affected. dlock's own
// watches start at the current revision. Several Lockers compacting is
// harmless, since compaction is idempotent and one that another already
// took further is ignored, but each costs a request per period; one
// Locker per cluster, or the server's flag, is enough.
//
// # TLS, users and least privilege
//
// dlock.Open takes etcds://[user:pass@]host[:port][,...][/prefix] with
// the TLS parameters of backend.TLSParams (tls_ca, tls_cert and tls_key
// for a server with --client-cert-auth, tls_server_name,
// tls_insecure_skip_verify=true only when named). A server certificate
// that does not verify, or the server refusing the client's, ends Open at
// once with a clear error. With authentication on, the user is the URL's,
// or else the client certificate's common name.
//
// A Locker needs read and write on its prefix's key range and nothing
// else: leases (grant, keep-alive, revoke of a lease whose keys are all
// in that range) need no permission of their own in etcd 3.4.
//
//	etcdctl role add locker
//	etcdctl role grant-permission locker readwrite --prefix=true dlock/
//	etcdctl user grant-role USER locker
//
// etcd's refusals (a wrong user or password, a missing permission, a
// certificate the server refuses) get errors wrapping dlock.ErrDenied, at
// once. Another owner cannot release or refresh a holder's lock through
// its own Lock handles; but anyone with write access to the prefix can
// delete the holder's key (or call Locker.ForceRelease, the
// administrator's override), and the holder's Done then closes at its
// next renewal. Owner strings are part of key names: they are not
// secrets from anyone who can read the prefix.
package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "dlock/"

	// DefaultSessionTTL is Options.SessionTTL's default.
	DefaultSessionTTL = 10 * time.Second
)

// Options configures an etcd Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every key dlock uses. Default: DefaultPrefix.
	Prefix string

	// SessionTTL is the TTL of the Locker's etcd lease, rounded up to
	// whole seconds; the server may raise it to its minimum (about
	// 1.5 election timeouts). A holder that dies keeps its locks this long.
	// Default: DefaultSessionTTL.
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
	// matters little. Default: backend.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the etcd cluster behind cli. The Locker does
// not close cli; close the Locker first. A nil opts means defaults. A nil
// cli or a negative SessionTTL or CompactEvery gets an error wrapping
// dlock.ErrInvalid. New makes no request: the Locker's session lease is
// granted by its first acquisition, within that call's context (and a
// CompactEvery loop makes its first one a period later).
func New(cli *clientv3.Client, opts *Options) (*dlock.Locker, error) {
	d, cfg, err := newDriver(cli, opts, false)
	if err != nil {
		return nil, err
	}
	return backend.New(d, cfg), nil
}

// newDriver validates opts and returns the driver and the Locker's
// configuration; with ownClient set (Open made cli) the driver's Close
// closes cli.
func newDriver(cli *clientv3.Client, opts *Options, ownClient bool) (*etcdDriver, *backend.Config, error) {
	if cli == nil {
		return nil, nil, fmt.Errorf("etcdlock: new: nil *clientv3.Client: %w", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SessionTTL < 0 {
		return nil, nil, fmt.Errorf("etcdlock: new: negative SessionTTL %v: %w", o.SessionTTL, dlock.ErrInvalid)
	}
	if o.CompactEvery < 0 {
		return nil, nil, fmt.Errorf("etcdlock: new: negative CompactEvery %v: %w", o.CompactEvery, dlock.ErrInvalid)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &etcdDriver{
		cli:        cli,
		ownClient:  ownClient,
		prefix:     o.Prefix,
		sessionTTL: int64((o.SessionTTL + time.Second - 1) / time.Second),
		ctx:        ctx,
		cancel:     cancel,
	}
	d.leases = sessionlock.New(sessionlock.Config[entry]{
		Name: "etcdlock",
		Remove: func(ctx context.Context, e entry) error {
			_, err := d.deleteKey(ctx, e.key, e.rev)
			return err
		},
		Live: func(e entry) bool { return !e.sess.dead.Load() },
	})
	if o.CompactEvery > 0 {
		d.bg.Add(1)
		go d.compactLoop(o.CompactEvery) // exits at Close
	}
	return d, &backend.Config{MaxRetryInterval: o.MaxRetryInterval}, nil
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
// ForceReleaser, MultiHolder and ChangeNotifier.
type etcdDriver struct {
	cli        *clientv3.Client
	ownClient  bool // made by Open: Close closes it
	prefix     string
	sessionTTL int64 // seconds

	ctx    context.Context // cancelled by Close; bounds background calls
	cancel context.CancelFunc
	leases *sessionlock.Leases[entry]
	bg     sync.WaitGroup // keep-alive loops, the compaction loop

	mu     sync.Mutex
	closed bool
	sess   *session // the live session, nil until granted again
}

// entry is an acquisition's key: its create revision (the fencing token)
// and the session it is attached to (nil for an orphan).
type entry struct {
	key  string
	rev  int64
	sess *session
	// ahead is, for an entry Join put, how many keys were ahead of it
	// then (-1 unknown), for driver.Result.Ahead; 0 for others.
	ahead int
}

var _ sessionlock.Driver = (*etcdDriver)(nil)

// key returns l's key: the name's prefix, l's mode's tag, its owner.
func (d *etcdDriver) key(l driver.Lease) string {
	return Key(d.prefix, l.Name) + sessionlock.ModeOf(l).Tag() + l.Owner
}

// Backend names the store for hooks.
func (d *etcdDriver) Backend() string { return "etcd" }

func (d *etcdDriver) Close() error {
	es := d.leases.Close()
	d.mu.Lock()
	d.closed = true
	s := d.sess
	d.sess = nil
	d.mu.Unlock()
	d.cancel() // stops the keep-alive and compaction loops
	d.bg.Wait()
	d.leases.Wait()

	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	var err error
	if s != nil {
		// Revoking the session deletes every key still attached to it.
		if _, rerr := d.cli.Revoke(ctx, s.id); rerr != nil {
			err = fmt.Errorf("etcdlock: close: revoke lease %x: %w", s.id, rerr)
		}
	}
	for _, e := range es {
		if s == nil || e.sess != s {
			d.deleteKey(ctx, e.key, e.rev)
		}
	}
	if d.ownClient {
		d.cli.Close()
	}
	return err
}
