// Package zklock is the dlock backend for ZooKeeper, through the user's own
// *zk.Conn (github.com/go-zookeeper/zk). Requires ZooKeeper 3.5 or later
// (container nodes).
//
// # Store URLs
//
// Importing the package registers this with dlock.Open:
//
//	zk://[user:password@]host[:port][,host[:port]][/prefix]
//
// with the query parameters session_timeout (a Go duration; default 10s)
// and suspend_timeout (Options.SuspendTimeout). Open waits for a session
// before it returns. With a user and password, the connection logs in with
// the digest scheme, again on every reconnect, and every znode the Locker
// creates gets all permissions for that identity and READ for anyone:
// other clients can read holders (Inspect, Observe) but not delete or
// overwrite them. That identity needs CREATE and READ on the prefix's
// root, nothing above it. ZooKeeper has no TLS here.
//
// # Guarantees
//
//   - Every acquisition, held or waiting, is an ephemeral sequential child
//     of the name's container znode; shared, exclusive and permit
//     acquisitions join one queue, so waiters are served in arrival order
//     and a writer is never overtaken by readers that come after it.
//   - A waiter watches only the children whose deletion may let it in: a
//     release of an exclusive lock wakes exactly one waiter, with no herd.
//     An uncontended acquisition and release cost two requests.
//   - The fencing token is the czxid of the holder's child, which strictly
//     increases across the ensemble, also when an empty parent is removed
//     and created again.
//   - No wall clock, on either side, is part of any promise: a step of a
//     server's clock ends no lease early.
//   - A late or retried release deletes its child by exact path and never
//     another owner's; a create whose reply was lost is found again.
//   - Between uses a name keeps only its parent znode, empty, which the
//     server's container manager deletes within a minute or two.
//
// # Limits
//
//   - If the holder's process dies, nothing deletes its child until the
//     server expires its session: the next waiter gets the lock after the
//     session timeout (the URL's session_timeout, 10 s by default; for New,
//     the one conn negotiated), not after the lock's TTL (WithTTL). The
//     server bounds the timeout to 2 to 20 tickTimes (4 s to 40 s by
//     default) and the client adopts the one it grants. The session is
//     the connection's, shared by every lock of the Locker, so it cannot
//     follow each lock's TTL; dlock run and lead set session_timeout from
//     --ttl.
//   - Every lock held through the connection is lost when the session
//     expires, or when the connection has been lost for longer than
//     Options.SuspendTimeout (by default: at once).
//   - A hard quota on the prefix (enforced with zookeeper.enforceQuota=true)
//     makes Acquire fail with an error wrapping dlock.ErrNoSpace; a server
//     whose disk is full stops serving instead, and the client sees a lost
//     connection.
//   - After losing its connection the zk client pauses a fixed second
//     between rounds of dials, with no jitter.
//   - The zk client waits up to 6.7 session timeouts for a server's answer
//     to a connect request; a restarting server may never answer one.
//     Open bounds that wait; a conn passed to New should be made with
//     BoundedDialer.
//   - Lock.Token gives a token, but Locker.Resume, Lock.Extend and
//     dlock.WithLockDelay get errors wrapping dlock.ErrUnsupported: an
//     ephemeral znode belongs to the session that created it for life,
//     and its lease is that session, shared by every lock of the conn.
//     So a hold cannot move to another process's session (a new node
//     would get a new czxid, the fencing token), one lock's lease cannot
//     change length alone, and the node of a dead holder goes with its
//     session, never later. Lock.Warnings works as on every backend.
//
// # Example
//
//	const session = 10 * time.Second
//	conn, _, err := zk.Connect([]string{"localhost:2181"}, session,
//		zk.WithDialer(zklock.BoundedDialer(session, nil))) // see BoundedDialer
//	if err != nil {
//		return err
//	}
//	locker, err := zklock.New(conn, nil) // close the Locker before conn
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "scheduler")
//
// Design: the queue and its watches, fencing tokens, what stays on the
// server, leases, TTLs and sessions, and authentication and ACLs are
// described in DESIGN.md in this package's directory (zklock/DESIGN.md).
package zklock

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
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
	// this matters little. Default: driver.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the ZooKeeper ensemble behind conn. The Locker
// does not close conn; close the Locker first. A nil opts means defaults.
// A nil conn, a Prefix that is not a valid znode path or a negative
// SuspendTimeout gets an error wrapping dlock.ErrInvalid. New makes no
// request.
func New(conn *zk.Conn, opts *Options) (*dlock.Locker, error) {
	l, _, err := newLocker(conn, opts, false)
	return l, err
}

// newLocker is New, also returning the driver under the Locker (for the
// test hook); with ownConn set (Open made conn) the Locker's Close closes
// conn.
func newLocker(conn *zk.Conn, opts *Options, ownConn bool) (*dlock.Locker, driver.Driver, error) {
	if conn == nil {
		return nil, nil, fmt.Errorf("zklock: new: nil *zk.Conn: %w", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	prefix, err := cleanPrefix(o.Prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("zklock: new: %w", err)
	}
	if o.SuspendTimeout < 0 {
		return nil, nil, fmt.Errorf("zklock: new: negative SuspendTimeout %v: %w", o.SuspendTimeout, dlock.ErrInvalid)
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
	return dlock.NewLocker(d, driver.LockerOptions{MaxRetryInterval: o.MaxRetryInterval}), d, nil
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
// ForceReleaser, MultiHolder, ChangeNotifier and Classifier.
type zkDriver struct {
	errorKinds // Classify
	conn       *zk.Conn
	ownConn    bool   // made by Open: Close closes it
	prefix     string // cleaned: "" or "/a/b"
	acl        []zk.ACL
	suspend    time.Duration

	leases  *sessionlock.Leases[entry]
	closing chan struct{} // closed by Close
	bg      sync.WaitGroup

	mu     sync.Mutex
	unsure map[string]bool // owners whose create reply was lost

	watches watchSet // the waits' watches on predecessors
}

// entry is a held lock's child: its path and the session that owns it.
// An orphan's session may be 0 (unknown). An orphan with an owner is the
// child, if any, that a create whose reply was lost made for owner under
// the parent at path (see Release).
type entry struct {
	path    string
	session int64
	owner   string
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
			if err := d.removeEntry(ctx, e); err != nil {
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
