package kubelock

import (
	"context"
	"errors"
	"fmt"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dlock-go/dlock/driver"
)

// conflictRetries bounds the attempts of one step whose compare-and-set
// lost to another writer: each loss means the Lease changed, so the step
// reads it again and decides anew.
const conflictRetries = 3

// read returns the Lease of name, or nil and the resourceVersion of a
// list that found it absent (a revision above every write to it before).
func (d *kubeDriver) read(ctx context.Context, name string) (*coordv1.Lease, uint64, error) {
	lease, err := d.leases.Get(ctx, leaseName(name), metav1.GetOptions{})
	if err == nil {
		return lease, 0, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, 0, err
	}
	list, err := d.leases.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", leaseName(name)).String()})
	if err != nil {
		return nil, 0, err
	}
	if len(list.Items) > 0 { // created in between
		return &list.Items[0], 0, nil
	}
	rv, ok := rvOf(list.ResourceVersion)
	if !ok {
		return nil, 0, fmt.Errorf("kubelock: list of leases has resourceVersion %q, not a positive integer", list.ResourceVersion)
	}
	return nil, rv, nil
}

// write creates lease if it has no resourceVersion, and updates it
// compared by its resourceVersion otherwise. It returns an error wrapping
// errConflict when another write (or a deletion) came first.
func (d *kubeDriver) write(ctx context.Context, lease *coordv1.Lease) (*coordv1.Lease, error) {
	var out *coordv1.Lease
	var err error
	if lease.ResourceVersion == "" {
		out, err = d.leases.Create(ctx, lease, metav1.CreateOptions{})
	} else {
		out, err = d.leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	// A conflict, a Create that another Create beat, or an Update of a
	// Lease deleted since it was read: the Lease is not as read.
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || (lease.ResourceVersion != "" && apierrors.IsNotFound(err)) {
		return nil, fmt.Errorf("%w: %w", errConflict, err)
	}
	return out, err
}

// Acquire implements driver.Driver: one read, and one write when the
// Lease is absent, free, this owner's, or the takeover the core asks for.
func (d *kubeDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	for range conflictRetries {
		res, err := d.tryAcquire(ctx, l)
		if !errors.Is(err, errConflict) {
			return res, err
		}
	}
	return driver.Result{}, nil // contended: the core tries again
}

// tryAcquire is one read and at most one write of Acquire.
func (d *kubeDriver) tryAcquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	lease, absentRV, err := d.read(ctx, l.Name)
	if err != nil {
		return driver.Result{}, err
	}
	var fence uint64
	switch holder := holderOf(lease); {
	case lease == nil:
		lease, fence = newLease(l.Name), absentRV
	case holder == "" || (l.Takeover != "" && l.Takeover == lease.ResourceVersion):
		if fence, err = replacedRV(lease); err != nil {
			return driver.Result{}, err
		}
	case holder == l.Owner:
		if f, ok := grantOf(lease); ok {
			fence = f // a retried Acquire: the token the store holds
			break
		}
		fallthrough // the owner string of another client: not ours
	default:
		ttl := durationOf(lease)
		return driver.Result{Stamp: lease.ResourceVersion, StampTTL: ttl, Remaining: ttl}, nil
	}
	grant(lease, l.Owner, l.Metadata, l.TTL, fence, d.renewTime(lease, l.Owner))
	out, err := d.write(ctx, lease)
	if err != nil {
		return driver.Result{}, err
	}
	d.remember(out)
	return driver.Result{Acquired: true, Fence: fence}, nil
}

// replacedRV returns the resourceVersion of lease as a fencing token.
func replacedRV(lease *coordv1.Lease) (uint64, error) {
	rv, ok := rvOf(lease.ResourceVersion)
	if !ok {
		return 0, fmt.Errorf("kubelock: lease %q has resourceVersion %q, not a positive integer", lease.Name, lease.ResourceVersion)
	}
	return rv, nil
}

// remember keeps the Lease a holder wrote last, for its next step.
func (d *kubeDriver) remember(lease *coordv1.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen[lease.Name] = lease
}

// forget drops what remember kept of a Lease.
func (d *kubeDriver) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, name)
	delete(d.marks, name)
}

// held returns a copy of the Lease of l as l's owner last wrote it, if
// the driver kept it and it names l's owner and token.
func (d *kubeDriver) held(l driver.Lease) *coordv1.Lease {
	d.mu.Lock()
	lease := d.seen[leaseName(l.Name)]
	d.mu.Unlock()
	if lease == nil || !owns(lease, l) {
		return nil
	}
	return lease.DeepCopy()
}

// owns reports whether lease is held by l's owner with l's token (any,
// when l.Fence is 0).
func owns(lease *coordv1.Lease, l driver.Lease) bool {
	f, ok := grantOf(lease)
	return ok && holderOf(lease) == l.Owner && (l.Fence == 0 || f == l.Fence)
}
