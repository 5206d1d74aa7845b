// Package kubelock is the dlock backend for Kubernetes, on
// coordination.k8s.io/v1 Lease objects in one namespace, through the
// user's own client-go clientset (k8s.io/client-go, v0.37).
//
// A lock is one Lease, written as client-go's leader election
// (tools/leaderelection with resourcelock.LeaseLock) writes it, so that a
// dlock Lead and a client-go LeaderElector on the same Lease exclude each
// other and hand over in both directions: a service can move from one to
// the other one replica at a time.
//
// # Store URLs
//
// Importing the package registers this scheme with dlock.Open:
//
//	kube:///namespace                      (the kubeconfig: $KUBECONFIG or ~/.kube/config)
//	kube:///namespace?kubeconfig=/path     (that kubeconfig file)
//	kube://in-cluster/namespace            (the pod's service account)
//
// with the query parameter context (a kubeconfig context other than the
// current one). An empty namespace is the kubeconfig context's namespace,
// or the pod's own in a cluster, or "default".
//
// # Guarantees
//
//   - Every step that changes a Lease is an Update that carries the
//     resourceVersion the driver read (a compare-and-set the apiserver
//     checks against etcd), or a Create of an absent Lease.
//   - Another identity's Lease is taken over only once its
//     resourceVersion was seen unchanged for its leaseDurationSeconds on
//     the taker's own monotonic clock (driver.Result.Stamp), as client-go
//     itself judges it. No wall clock, neither the writers' renewTime nor
//     the taker's, is part of any promise.
//   - The fencing token is the resourceVersion of the Lease that the
//     granting write replaced (for a Create, the resourceVersion of the
//     read that found the Lease absent): an etcd revision, which rises
//     across the whole cluster, so tokens rise per name also across
//     deletion and re-creation of the Lease. It is kept in the Lease's
//     annotation dlock.dev/grant with the holder's identity. See DESIGN.md.
//   - Waiters are woken by a watch on the Lease (one per name per Locker),
//     never by polling alone.
//
// # Limits
//
//   - Exclusive locks only (NoModes): a Lease has one holderIdentity, and
//     client-go's leader election reads nothing else; shared holds and
//     semaphore permits would be invisible to it.
//   - No Resume and no lock-delay: a Lease's holderIdentity is the
//     owner string the core compares, and client-go would not honour a
//     delay. Lock.Extend is kept (it rewrites leaseDurationSeconds).
//   - leaseDurationSeconds is the TTL rounded up to whole seconds plus
//     one: client-go compares records at one-second precision, so a
//     dlock holder's renewals within one second look alike to it. A
//     holder repeats a renewTime second for at most one second of its
//     monotonic clock (after a step back of its wall clock, renewTime
//     runs ahead of it by up to the step), so that a client-go candidate
//     never takes over before the holder's Done closes. See DESIGN.md.
//   - A holder that dies keeps the name for leaseDurationSeconds after
//     the waiter's first look at its last renewal.
//   - Names that are not valid Lease names (a DNS subdomain of at most
//     253 characters) are kept under "dlock-" and a digest of the name,
//     with the name in the annotation dlock.dev/name.
//
// # Access control
//
// A Locker needs get, list, watch, create and update on leases in its
// namespace (and delete for nothing but ForceRelease's fallback):
//
//	kubectl create role dlock --verb=get,list,watch,create,update --resource=leases.coordination.k8s.io
//	kubectl create rolebinding dlock --role=dlock --serviceaccount=NS:SA
//
// The apiserver's refusals (401, 403) get errors wrapping dlock.ErrDenied.
package kubelock

import (
	"errors"
	"fmt"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Options configures a Locker made by New. The zero value (or nil) means
// defaults.
type Options struct {
	// MaxRetryInterval bounds the wait between attempts of a waiter whose
	// wake-ups were lost. Default: driver.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker whose locks are Leases in namespace, through cs: a
// client-go clientset (a *kubernetes.Clientset or any kubernetes.Interface,
// passed as it is: type inference finds C and L), or any value whose
// CoordinationV1() serves Leases by namespace. kubelock names no client-go
// clientset type, so that a program that links it links no other API
// group (see DESIGN.md, "Client"). New does not close cs (clientsets need
// no closing). Every lock's requests go through cs's client-side rate
// limit: each held lock renews 3/TTL times a second, and each waiter reads
// its Lease when woken, so give cs a rate limit above client-go's default
// of 5 requests a second (rest.Config QPS and Burst; store URLs use URLQPS
// and URLBurst) when it serves more than a few locks with short TTLs. opts
// may be nil. A nil cs or an empty namespace is an error wrapping
// dlock.ErrInvalid.
func New[C interface{ Leases(namespace string) L }, L LeaseClient](cs interface{ CoordinationV1() C }, namespace string, opts *Options) (*dlock.Locker, error) {
	if cs == nil {
		return nil, fmt.Errorf("kubelock: nil clientset: %w", dlock.ErrInvalid)
	}
	if namespace == "" {
		return nil, fmt.Errorf("kubelock: empty namespace: %w", dlock.ErrInvalid)
	}
	d, lcfg, err := newDriver(cs.CoordinationV1().Leases(namespace), opts)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, lcfg), nil
}

// kubeDriver implements driver.Driver over Leases.
type kubeDriver struct {
	leases     LeaseClient
	watches    *hub
	closeConns func() // set for a clientset the driver made (store URLs), else nil

	mu    sync.Mutex
	seen  map[string]*coordv1.Lease // the last Lease each name's holder wrote, by Lease name
	marks map[string]renewMark      // the renewTime second each holder wrote last, by Lease name
}

// newDriver returns the driver of the Leases of one namespace through
// leases.
func newDriver(leases LeaseClient, opts *Options) (*kubeDriver, driver.LockerOptions, error) {
	if leases == nil {
		return nil, driver.LockerOptions{}, fmt.Errorf("kubelock: nil lease client: %w", dlock.ErrInvalid)
	}
	if opts == nil {
		opts = &Options{}
	}
	d := &kubeDriver{leases: leases, seen: make(map[string]*coordv1.Lease), marks: make(map[string]renewMark)}
	d.watches = newHub(leases)
	return d, driver.LockerOptions{MaxRetryInterval: opts.MaxRetryInterval}, nil
}

// Backend implements driver.Describer.
func (d *kubeDriver) Backend() string { return "kubernetes" }

// HonoursContext implements driver.ContextHonourer: client-go's requests
// end when their context does.
func (d *kubeDriver) HonoursContext() bool { return true }

// Close stops the driver's watches. It does not touch a clientset given
// to New; one made for a store URL has its idle connections closed.
func (d *kubeDriver) Close() error {
	d.watches.close()
	if d.closeConns != nil {
		d.closeConns()
	}
	return nil
}

// errConflict is a write that lost its compare-and-set to another.
var errConflict = errors.New("kubelock: the lease changed under the write")

// errClosed is a step of a closed driver.
var errClosed = fmt.Errorf("kubelock: %w", dlock.ErrClosed)
