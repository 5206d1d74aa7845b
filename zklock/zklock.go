// Package zklock is the dlock backend for ZooKeeper, through the user's own
// *zk.Conn (github.com/go-zookeeper/zk). Requires ZooKeeper 3.5 or later
// (container nodes).
//
// # Layout and waiting
//
// Each lock name has a parent znode, Prefix + "/" + escaped name (see Key),
// created as a container node so the server removes it once it is empty.
// Every acquisition, held or waiting, is an ephemeral sequential child
// named tag + owner + "-" + sequence number, where the tag records the
// acquisition's mode: "" for an exclusive hold (a mutex's children are
// named as before), "S." for a shared one (dlock.Shared), "P<n>." for a
// permit of a semaphore of n (dlock.WithLimit). Shared, exclusive and
// permit acquisitions join one queue, ordered by sequence number, and
// every client applies the same rule to one read of it (as Curator's
// InterProcessReadWriteLock and InterProcessSemaphoreV2 do): an exclusive
// child holds when it is first; a shared child when no exclusive child
// is before it; a permit when it is among the first n. A waiter watches
// only the children whose deletion may let it in: an exclusive one the
// child just before it, so a release wakes exactly one waiter (no herd);
// a shared one the nearest exclusive child before it; a permit the n
// children just before it. Waiters are served in arrival order, and a
// writer that waits is never overtaken by readers that come after it:
// they queue behind it. A child of another kind before one's own (a lock
// against a semaphore, or another limit) makes Acquire fail with an
// error wrapping dlock.ErrInvalid at once, after deleting its child. A
// waiter that gives up deletes its child before returning.
//
// The child's name carries the acquisition's owner string, unique per
// acquisition, so a create whose reply was lost is found again rather than
// duplicated, and release deletes the child by its exact path: a late or
// retried release can never delete another owner's child.
//
// The create of a child is one transaction (a multi) with a write of the
// parent's data, which dlock keeps empty: the parent's new stat, in the
// reply, says whether the child is its only child, and then it holds at
// once (an uncontended acquisition and release cost two requests).
// Otherwise the queue is read. Before a waiter that reached the head of
// the queue returns, it reads its child again and checks that it is still
// owned by the connection's current session; a child that holds at its
// create was made on the session the connection had before and after it.
// If the parent's ACL denies WRITE, the child is created alone and the
// queue read.
//
// # Fencing tokens
//
// The token is the czxid of the holder's child: the zxid of the
// transaction that created it (for a child that holds at its create, the
// mzxid the transaction gave its parent: the same zxid). Zxids are global to the ensemble and
// strictly increase, and a child holds only once every child created
// before it holds or is gone, so tokens strictly increase in the order
// holds become possible, shared holds and permits included: a writer's
// token is above every earlier reader's. Zxids do not restart when the
// server removes an empty parent and it is created again (sequence
// numbers do), so tokens keep increasing across that.
//
// Leases run on the session and the driver's monotonic clock, never on a
// wall clock, so a step of the server's clock ends none early: the
// driver never sets Result.Stamp. A lease's owner string names one
// acquisition and the driver keeps one child for it at a time, whose
// czxid is the token; Refresh checks that child, and when Lease.Fence is
// set also that it is this token (a compare in the driver's own table,
// no extra request), so a token that is no longer the owner's is
// refused even if the owner holds the name through a later child.
//
// The server's side needs no wall clock either: ZooKeeper tracks session
// expiry with Time.currentElapsedTime(), System.nanoTime (monotonic), in
// its session tracker's expiry queue, and a new leader restarts every
// session's timeout. So the fault suite steps no ZooKeeper clock. Tokens
// are czxids, a counter.
//
// Inspect reports every child that holds, with its mode; ForceRelease
// deletes them all (not the waiters'), and Locker.Observe is pushed by a
// watch on the parent's children.
//
// # What stays on the server
//
// A child lives as long as its acquisition: Release, a waiter that gives
// up and TryAcquire that fails delete it at once, and an ephemeral child
// goes with its session anyway (no ephemeral node remains once every
// Lock is released). Between uses a name keeps only its parent znode,
// empty: a container node, which the server's container manager deletes
// at its first pass after the parent has become empty, and the
// container znodes dlock made above it (the prefix's root, DefaultPrefix)
// likewise once they are empty. The manager runs every
// znode.container.checkIntervalMs (a Java system property of the server;
// default 60000, so an unused name's parent stays up to a minute, up to
// two for the root) and deletes at most znode.container.maxPerMinute
// containers a minute (default 10000; beyond that, parents wait for
// later passes). A parent that a later acquisition fills before the pass
// stays, and a pass never deletes a parent with a child. A parent made
// by hand (a plain znode, as cost tests do) stays until deleted by hand;
// a container that never had a child (a create that failed for good
// after the parent was made, say for want of CREATE on it) stays unless
// the server sets znode.container.maxNeverUsedIntervalMs (default 0:
// never). So the server holds, beyond the held and queued children, at
// most one empty znode per name used in the last minute or two, whatever
// the number of names ever used.
//
// A waiter sets one watch, on a predecessor it reads with getData, so a
// predecessor already gone leaves no watch (see the queue's watch); a
// wait that ends while its predecessor exists leaves the watch until the
// predecessor's child is deleted, and the driver's later waits on that
// predecessor share it rather than set another. Locker.Observe keeps a watch on the
// parent's children while it runs, and after it stops until the next
// change under the parent or the parent's deletion; an Observe of a name
// whose parent does not exist watches for its creation instead, and
// that watch, one per name and connection on the server, but one
// channel per such Observe in the client, stays until a holder or
// waiter creates the parent (or the connection closes).
//
// A server that refuses a create for lack of room, a hard quota on the
// prefix or a path above it (zkCli's setquota -N or -B, enforced when
// the server runs with zookeeper.enforceQuota=true), makes Acquire and
// TryAcquire fail at once with an error wrapping dlock.ErrNoSpace;
// releases, and so the end of held names, still go through. A server
// whose disk is full stops serving instead (ZooKeeper treats a failed
// write of its transaction log as fatal and shuts down): the client sees
// a lost connection, not ErrNoSpace.
//
// The zk client keeps one connection per *zk.Conn; after losing it, it
// tries each server once, then pauses one second (a fixed pause, no
// jitter) before the next round, so a server restart costs each
// connection about one dial a second, whatever the waiters do.
//
// Each uncontended acquisition and release of a name whose parent exists
// costs two transactions (two zxids: the create of the child with the
// write of the parent's data, then the delete); the first use of a name
// costs three more (the transaction that fails for want of the parent,
// then a create of the root and of the parent: ZooKeeper gives a write
// that fails, such as the create of a root that exists, a zxid too), and
// the container manager's delete of the parent one.
//
// # Leases, TTLs and sessions
//
// A ZooKeeper session is the connection's (its timeout is chosen by the
// zk.Connect call that made conn); an ephemeral child lives as long as the
// session. WithTTL maps onto a deadline the driver keeps for each
// acquisition: if the lock is not refreshed (renewed by dlock, or
// Lock.Refresh) within its TTL, the driver deletes the child itself. The
// deadline is the TTL from the send time of the request that last found
// the child in place (the read that found it at the head of the queue,
// then each refresh), and the core, which measures from that moment or an
// earlier one, closes the holder's Done a tenth of the TTL before it. So
// a WithoutRenewal lock ends after its TTL even though the session lives
// on, and a renewed lock is held as long as it is renewed.
//
// If the holder's process dies, nothing deletes its child until the server
// expires its session: the next waiter then gets the lock after the
// session timeout, not after the TTL.
//
// Every lock held through conn is lost (its Done closes) when the session
// expires, or when the connection has been lost for longer than
// Options.SuspendTimeout (by default: at once). The zk client notices a
// silent connection after two thirds of the negotiated session timeout,
// and the server may expire the session one third of it later; closing
// Done as soon as the client reports the connection lost stays within
// that third. The driver reads the connection's state every 50 ms while
// it holds locks, since the connection's event
// channel belongs to the caller. The child of a lock lost this way is
// deleted as soon as the connection is back (or goes with the session).
//
// # Authentication and ACLs
//
// New uses conn as it is: a user who authenticates conn (conn.AddAuth)
// sets Options.ACL for the znodes dlock creates. A zk://user:password@host
// URL (dlock.Open) authenticates with the digest scheme, which the zk
// client repeats on every new connection, and creates every znode with
// all permissions for that identity and READ for anyone: other clients
// can list and read the queue (Inspect, Observe) but not delete or write
// its children or parent, nor join the queue of a name whose parent that
// identity created. ZooKeeper checks DELETE on a child's parent, so the
// parent's ACL is what protects a holder's child. The least an
// administrator grants that identity on the prefix's root, when it
// exists, is CREATE and READ; nothing is needed on the znodes above it.
package zklock

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// DefaultPrefix is Options.Prefix's default.
const DefaultPrefix = "/dlock"

// sessionPollInterval is how often a Locker that holds locks reads its
// connection's state to notice a lost connection or session.
const sessionPollInterval = 50 * time.Millisecond

// Options configures a ZooKeeper Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is the absolute path of the znode under which every lock's
	// parent znode is created ("/" for the root itself). Missing znodes on
	// the path are created as container nodes. Default: DefaultPrefix.
	Prefix string

	// ACL is the ACL of every znode dlock creates. It must give the
	// identities of the Lockers that share a name CREATE, DELETE and READ
	// on the name's parent znode (and WRITE: without it each acquisition costs
	// two more round trips), and CREATE on the prefix's znodes that dlock
	// creates. Default: zk.WorldACL(zk.PermAll).
	ACL []zk.ACL

	// SuspendTimeout is how long the connection may stay lost before every
	// lock held through it counts as lost. Keep it well below a third of
	// the negotiated session timeout minus 50 ms (how often the driver
	// reads the connection's state), or another owner may get a lock whose
	// holder's Done is still open.
	// Default: 0, a lock is lost as soon as its connection is.
	SuspendTimeout time.Duration

	// MaxRetryInterval bounds how long dlock waits between attempts when
	// no wake-up arrives. Waiters on ZooKeeper are woken by watches, so
	// this matters little. Default: backend.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the ZooKeeper ensemble behind conn. The Locker
// does not close conn; close the Locker first. A nil opts means defaults.
// A nil conn, a Prefix that is not a valid znode path or a negative
// SuspendTimeout gets an error wrapping dlock.ErrInvalid. New makes no
// request.
func New(conn *zk.Conn, opts *Options) (*dlock.Locker, error) {
	return newLocker(conn, opts, false)
}

// newLocker is New; with ownConn set (Open made conn) the Locker's Close
// closes conn.
func newLocker(conn *zk.Conn, opts *Options, ownConn bool) (*dlock.Locker, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: new: nil *zk.Conn: %w", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	prefix, err := cleanPrefix(o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("zklock: new: %w", err)
	}
	if o.SuspendTimeout < 0 {
		return nil, fmt.Errorf("zklock: new: negative SuspendTimeout %v: %w", o.SuspendTimeout, dlock.ErrInvalid)
	}
	if o.ACL == nil {
		o.ACL = zk.WorldACL(zk.PermAll)
	}
	d := &zkDriver{
		conn:    conn,
		ownConn: ownConn,
		prefix:  prefix,
		acl:     o.ACL,
		suspend: o.SuspendTimeout,
		closing: make(chan struct{}),
		unsure:  make(map[string]bool),
	}
	d.leases = sessionlock.New(sessionlock.Config[entry]{
		Name:   "zklock",
		Remove: d.remove,
	})
	d.bg.Add(1)
	go d.watchSession() // exits when Close closes d.closing
	return backend.New(d, &backend.Config{MaxRetryInterval: o.MaxRetryInterval}), nil
}

// cleanPrefix returns prefix ("" means DefaultPrefix) with a leading slash
// and without a trailing one ("" for "/"), or an error wrapping
// dlock.ErrInvalid if ZooKeeper would reject it as a path.
func cleanPrefix(prefix string) (string, error) {
	p := trimPrefix(prefix)
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
			return "", fmt.Errorf("prefix %q is not a valid znode path: %w", prefix, dlock.ErrInvalid)
		}
	}
	return p, nil
}

func trimPrefix(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	prefix = strings.TrimRight(prefix, "/")
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	return prefix
}

// Key returns the znode under which the lock on name queues its holder
// and waiters, for prefix ("" means DefaultPrefix): prefix + "/" + name
// with every byte other than ASCII letters, digits, '-' and '_' written
// as %XX. Deleting its children ends the lock, as an administrator might.
func Key(prefix, name string) string {
	return trimPrefix(prefix) + "/" + escape(name)
}

func escape(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// zkDriver implements driver.Driver, Queuer, LossReporter, Inspector,
// ForceReleaser, MultiHolder and ChangeNotifier.
type zkDriver struct {
	conn    *zk.Conn
	ownConn bool   // made by Open: Close closes it
	prefix  string // cleaned: "" or "/a/b"
	acl     []zk.ACL
	suspend time.Duration

	leases  *sessionlock.Leases[entry]
	closing chan struct{} // closed by Close
	bg      sync.WaitGroup

	mu     sync.Mutex
	unsure map[string]bool // owners whose create reply was lost

	watches watchSet // the waits' watches on predecessors
}

// entry is a held lock's child: its path and the session that owns it.
// An orphan's session may be 0 (unknown).
type entry struct {
	path    string
	session int64
}

var _ sessionlock.Driver = (*zkDriver)(nil)

func (d *zkDriver) parent(name string) string { return d.prefix + "/" + escape(name) }

// Backend names the store for hooks.
func (d *zkDriver) Backend() string { return "zookeeper" }

func (d *zkDriver) Close() error {
	es := d.leases.Close()
	close(d.closing)
	var errs []error
	if len(es) > 0 {
		ctx, cancel := sessionlock.CleanupContext()
		defer cancel()
		for _, e := range es {
			if err := d.delete(ctx, e.path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.bg.Wait()
	d.leases.Wait()
	if d.ownConn {
		d.conn.Close()
	}
	if len(errs) > 0 {
		return fmt.Errorf("zklock: close: %w", errs[0])
	}
	return nil
}
