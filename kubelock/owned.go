package kubelock

import (
	"context"
	"errors"
	"fmt"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dlock-go/dlock/driver"
)

// ownedWrite applies change to the Lease of l and writes it, compared by
// resourceVersion, if l's owner holds it with l's token: first on the
// Lease as the owner last wrote it (one request), then, if another write
// came between, on a fresh read. It returns an error wrapping
// driver.ErrNotHeld when the owner does not hold it.
func (d *kubeDriver) ownedWrite(ctx context.Context, l driver.Lease, change func(*coordv1.Lease)) (*coordv1.Lease, error) {
	lease := d.held(l)
	for range conflictRetries {
		if lease == nil {
			fresh, err := d.leases.Get(ctx, leaseName(l.Name), metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && !owns(fresh, l)) {
				d.forget(leaseName(l.Name))
				return nil, fmt.Errorf("kubelock: %q: %w", l.Name, driver.ErrNotHeld)
			}
			if err != nil {
				return nil, err
			}
			lease = fresh
		}
		change(lease)
		out, err := d.write(ctx, lease)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, errConflict) {
			return nil, err
		}
		lease = nil
	}
	return nil, fmt.Errorf("kubelock: %q: %w", l.Name, errConflict)
}

// Refresh implements driver.Driver: one Update per lease, on the Lease as
// its owner last wrote it.
func (d *kubeDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	for i, l := range ls {
		out, err := d.ownedWrite(ctx, l, func(lease *coordv1.Lease) { renew(lease, l.TTL, d.renewTime(lease, l.Owner)) })
		if err == nil {
			d.remember(out)
		}
		errs[i] = err
	}
	return errs
}

// Extend implements driver.Extender: a Refresh that writes l.TTL's
// leaseDurationSeconds, which later Refresh calls keep.
func (d *kubeDriver) Extend(ctx context.Context, l driver.Lease) error {
	return d.Refresh(ctx, []driver.Lease{l})[0]
}

// Release implements driver.Driver: an owner-checked Update that leaves
// the Lease as client-go's ReleaseOnCancel does (no holder), which wakes
// every watcher of it.
func (d *kubeDriver) Release(ctx context.Context, l driver.Lease) error {
	_, err := d.ownedWrite(ctx, l, free)
	if err == nil {
		d.forget(leaseName(l.Name))
	}
	return err
}
