// Package zklock is the dlock backend for ZooKeeper, through the user's own
// *zk.Conn (github.com/go-zookeeper/zk). Requires ZooKeeper 3.5 or later
// (container nodes).
//
// # Layout and waiting
//
// Each lock name has a parent znode, Root + "/" + escaped name (see Path),
// created as a container node so the server removes it once it is empty.
// Every acquisition, held or waiting, is an ephemeral sequential child
// named owner + "-" + sequence number. The child with the lowest sequence
// number holds the lock; every other child waits for the deletion of the
// child just before it, and only that one, so a release wakes exactly one
// waiter (no herd) and waiters are served in arrival order. A waiter that
// gives up deletes its child before returning.
//
// The child's name carries the acquisition's owner string, unique per
// acquisition, so a create whose reply was lost is found again rather than
// duplicated, and release deletes the child by its exact path: a late or
// retried release can never delete another owner's child.
//
// Before a waiter that reached the head of the queue returns, it reads its
// child again and checks that it is still owned by the connection's
// current session.
//
// # Fencing tokens
//
// The token is the czxid of the holder's child: the zxid of the
// transaction that created it. Zxids are global to the ensemble and
// strictly increase, and a later holder's child was always created after
// the earlier holder's, so tokens strictly increase across holders.
//
// # Leases, TTLs and sessions
//
// A ZooKeeper session is the connection's (its timeout is chosen by the
// zk.Connect call that made conn); an ephemeral child lives as long as the
// session. WithTTL maps onto a deadline the driver keeps for each
// acquisition: if the lock is not refreshed (renewed by dlock, or
// Lock.Refresh) within its TTL, the driver deletes the child itself. The
// core closes the holder's Done a tenth of the TTL before the deadline
// (the first deadline gets a twentieth of the TTL more, for the moment
// between the driver starting its clock and the core starting its own).
// So a WithoutRenewal lock ends after its TTL even though the session
// lives on, and a renewed lock is held as long as it is renewed.
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
// that third. The driver reads the connection's state every
// SessionPollInterval while it holds locks, since the connection's event
// channel belongs to the caller. The child of a lock lost this way is
// deleted as soon as the connection is back (or goes with the session).
package zklock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
)

const (
	// DefaultRoot is Options.Root's default.
	DefaultRoot = "/dlock"

	// SessionPollInterval is how often a Locker that holds locks reads its
	// connection's state to notice a lost connection or session.
	SessionPollInterval = 50 * time.Millisecond
)

// Options configures a ZooKeeper Locker. A nil *Options means defaults.
type Options struct {
	// Root is the absolute path of the znode under which every lock's
	// parent znode is created. Missing znodes on the path are created as
	// container nodes. Default: DefaultRoot.
	Root string

	// ACL is the ACL of every znode dlock creates.
	// Default: zk.WorldACL(zk.PermAll).
	ACL []zk.ACL

	// SuspendTimeout is how long the connection may stay lost before every
	// lock held through it counts as lost. Keep it well below a third of
	// the negotiated session timeout minus SessionPollInterval, or another
	// owner may get a lock whose holder's Done is still open.
	// Default: 0, a lock is lost as soon as its connection is.
	SuspendTimeout time.Duration

	// MaxRetryInterval bounds how long dlock waits between attempts when
	// no wake-up arrives. Waiters on ZooKeeper are woken by watches, so
	// this matters little. Default: backend.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the ZooKeeper ensemble behind conn. The Locker
// does not close conn; close the Locker first. A nil opts means defaults.
// With a nil conn every call on the Locker fails with an error wrapping
// dlock.ErrInvalid.
func New(conn *zk.Conn, opts *Options) *dlock.Locker {
	return newLocker(conn, opts, false)
}

// newLocker is New; with ownConn set (Open made conn) the Locker's Close
// closes conn.
func newLocker(conn *zk.Conn, opts *Options, ownConn bool) *dlock.Locker {
	var o Options
	if opts != nil {
		o = *opts
	}
	if conn == nil {
		return backend.New(invalidDriver{fmt.Errorf("zklock: nil *zk.Conn: %w", dlock.ErrInvalid)}, nil)
	}
	o.Root = cleanRoot(o.Root)
	if o.ACL == nil {
		o.ACL = zk.WorldACL(zk.PermAll)
	}
	d := &zkDriver{
		conn:    conn,
		ownConn: ownConn,
		root:    o.Root,
		acl:     o.ACL,
		suspend: max(o.SuspendTimeout, 0),
		losses:  make(chan driver.Loss, 16),
		closing: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		leases:  make(map[string]*lease),
		orphans: make(map[string]struct{}),
		unsure:  make(map[string]bool),
	}
	d.bg.Add(1)
	go d.watchSession() // exits when Close closes d.closing
	return backend.New(d, &backend.Config{MaxRetryInterval: o.MaxRetryInterval})
}

// cleanRoot returns root without a trailing slash ("" for "/"), with a
// leading one.
func cleanRoot(root string) string {
	if root == "" {
		root = DefaultRoot
	}
	root = strings.TrimRight(root, "/")
	if root != "" && !strings.HasPrefix(root, "/") {
		root = "/" + root
	}
	return root
}

// Path returns the znode under which the lock on name queues its holder
// and waiters, for root ("" means DefaultRoot): root + "/" + name with
// every byte other than ASCII letters, digits, '-' and '_' written as %XX.
// Deleting its children ends the lock, as an administrator might.
func Path(root, name string) string {
	return cleanRoot(root) + "/" + escape(name)
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

// invalidDriver fails every call with err.
type invalidDriver struct{ err error }

func (d invalidDriver) Acquire(context.Context, driver.Lease) (driver.Result, error) {
	return driver.Result{}, d.err
}

func (d invalidDriver) Refresh(_ context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	for i := range errs {
		errs[i] = d.err
	}
	return errs
}

func (d invalidDriver) Release(context.Context, driver.Lease) error { return d.err }
func (d invalidDriver) Close() error                                { return nil }

// zkDriver implements driver.Driver, Queuer and LossReporter.
type zkDriver struct {
	conn    *zk.Conn
	ownConn bool // made by Open: Close closes it
	root    string
	acl     []zk.ACL
	suspend time.Duration

	losses  chan driver.Loss
	closing chan struct{} // closed by Close
	kick    chan struct{} // buffered(1): a lease or orphan was added
	bg      sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	leases  map[string]*lease   // live acquisitions by owner
	orphans map[string]struct{} // paths of children to delete when connected
	reaping bool                // a reaper goroutine is running
	unsure  map[string]bool     // owners whose create reply was lost
}

func (d *zkDriver) parent(name string) string { return d.root + "/" + escape(name) }

func (d *zkDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	var paths []string
	for _, l := range d.leases {
		l.timer.Stop()
		paths = append(paths, l.path)
	}
	for p := range d.orphans {
		paths = append(paths, p)
	}
	d.leases, d.orphans = map[string]*lease{}, map[string]struct{}{}
	d.mu.Unlock()
	close(d.closing)
	var errs []error
	if len(paths) > 0 {
		ctx, cancel := cleanupContext()
		defer cancel()
		for _, p := range paths {
			if err := d.delete(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.bg.Wait()
	close(d.losses)
	if d.ownConn {
		d.conn.Close()
	}
	if len(errs) > 0 {
		return fmt.Errorf("zklock: close: %w", errs[0])
	}
	return nil
}

// errClosed is returned by calls on a closed driver.
var errClosed = fmt.Errorf("zklock: %w", dlock.ErrClosed)

func (d *zkDriver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *zkDriver) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}
