// Package etcdlock is the dlock backend for etcd v3, through the user's own
// *clientv3.Client (go.etcd.io/etcd/client/v3, v3.5). It uses only the
// v3 API that etcd servers from 3.4 on serve: transactions, leases, and
// watches from a revision.
//
// # Keys and waiting
//
// Each Locker grants one etcd lease (its session) and keeps it alive
// itself. Every acquisition, held or waiting, is a key attached to that
// lease: Prefix + escaped name + "/" + owner (see Key). Among the keys of
// a name, the one with the lowest create revision holds the lock; every
// other key waits, with a watch, for the deletion of the key with the next
// lower create revision, and only that one, so a release wakes exactly one
// waiter and waiters are served in arrival order. A waiter that gives up
// deletes its key before returning. Before a waiter that reached the head
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
// to the cluster and strictly increase, and a later holder's key was
// always created after the earlier holder's.
//
// # Leases, TTLs and sessions
//
// WithTTL maps onto a deadline the driver keeps for each acquisition: if
// the lock is not refreshed (renewed by dlock, or Lock.Refresh) within its
// TTL, the driver deletes the key itself. The core closes the holder's
// Done a tenth of the TTL before the deadline (the first deadline gets a
// twentieth of the TTL more, for the moment between the driver starting
// its clock and the core starting its own). So a WithoutRenewal lock ends
// after its TTL while the session lives on, and a renewed lock is held as
// long as it is renewed.
//
// The session lease lasts Options.SessionTTL, renewed every third of it.
// If the holder's process dies, its keys go when the server expires the
// lease: the next waiter gets the lock after SessionTTL, not after the
// lock's TTL. Every lock held through a session is lost (its Done closes)
// when the lease is found revoked or expired, or a tenth of SessionTTL
// before the lease can expire on the server, counted from the send time of
// the last keep-alive the server acknowledged. The Locker then revokes
// that lease (deleting its keys) and grants a new one for later
// acquisitions.
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
)

const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "dlock/"

	// DefaultSessionTTL is Options.SessionTTL's default.
	DefaultSessionTTL = 10 * time.Second

	// grantTimeout bounds the lease grant in New.
	grantTimeout = 10 * time.Second
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

	// MaxRetryInterval bounds how long dlock waits between attempts when
	// no wake-up arrives. Waiters on etcd are woken by watches, so this
	// matters little. Default: backend.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker on the etcd cluster behind cli, after granting its
// session lease. The Locker does not close cli; close the Locker first. A
// nil opts means defaults. A nil cli gets an error wrapping
// dlock.ErrInvalid.
func New(cli *clientv3.Client, opts *Options) (*dlock.Locker, error) {
	return newLocker(cli, opts, false)
}

// newLocker is New; with ownClient set (Open made cli) the Locker's Close
// closes cli.
func newLocker(cli *clientv3.Client, opts *Options, ownClient bool) (*dlock.Locker, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: new: nil *clientv3.Client: %w", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.SessionTTL <= 0 {
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
		losses:     make(chan driver.Loss, 16),
		leases:     make(map[string]*lease),
		orphans:    make(map[string]int64),
	}
	gctx, gcancel := context.WithTimeout(ctx, grantTimeout)
	defer gcancel()
	if _, err := d.session(gctx); err != nil {
		cancel()
		return nil, fmt.Errorf("etcdlock: new: %w", err)
	}
	return backend.New(d, &backend.Config{MaxRetryInterval: o.MaxRetryInterval}), nil
}

// Key returns the key prefix under which the lock on name queues its
// holder and waiters, for prefix ("" means DefaultPrefix): prefix + name
// with '%' and '/' written as %25 and %2F, + "/". Deleting the keys under
// it ends the lock, as an administrator might.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + escaper.Replace(name) + "/"
}

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// etcdDriver implements driver.Driver, Queuer and LossReporter.
type etcdDriver struct {
	cli        *clientv3.Client
	ownClient  bool // made by Open: Close closes it
	prefix     string
	sessionTTL int64 // seconds

	ctx    context.Context // cancelled by Close; bounds background calls
	cancel context.CancelFunc
	losses chan driver.Loss
	bg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	sess    *session          // the live session, nil until granted again
	leases  map[string]*lease // live acquisitions by owner
	orphans map[string]int64  // keys to delete (by create revision) when the server allows
}

func (d *etcdDriver) key(name, owner string) string { return Key(d.prefix, name) + owner }

// errClosed is returned by calls on a closed driver.
var errClosed = fmt.Errorf("etcdlock: %w", dlock.ErrClosed)

func (d *etcdDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	var all []*lease
	for _, ls := range d.leases {
		ls.timer.Stop()
		all = append(all, ls)
	}
	d.leases = map[string]*lease{}
	s := d.sess
	d.sess = nil
	d.mu.Unlock()
	d.cancel() // stops the keep-alive loops
	d.bg.Wait()
	close(d.losses)

	ctx, cancel := cleanupContext()
	defer cancel()
	var err error
	if s != nil {
		// Revoking the session deletes every key still attached to it.
		if _, rerr := d.cli.Revoke(ctx, s.id); rerr != nil {
			err = fmt.Errorf("etcdlock: close: revoke lease %x: %w", s.id, rerr)
		}
	}
	for _, ls := range all {
		if ls.sess != s {
			d.deleteKey(ctx, ls.key, ls.rev)
		}
	}
	d.reapOrphans(ctx)
	if d.ownClient {
		d.cli.Close()
	}
	return err
}

const cleanupTimeout = 5 * time.Second

func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}
