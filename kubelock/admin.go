package kubelock

import (
	"context"
	"errors"
	"net"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dlock-go/dlock/driver"
)

// Inspect implements driver.Inspector: the holder of each named Lease
// that has one, or of every Lease in the namespace when names is empty
// (client-go's leader elections included). A holder that is not a dlock
// owner has Fence 0. Remaining is 0: no clock the driver may trust says
// how much of a Lease is left.
func (d *kubeDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	var leases []coordv1.Lease
	if len(names) == 0 {
		list, err := d.leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		leases = list.Items
	}
	for _, name := range names {
		lease, err := d.leases.Get(ctx, leaseName(name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		leases = append(leases, *lease)
	}
	var holders []driver.Holder
	for i := range leases {
		lease := &leases[i]
		if holderOf(lease) == "" {
			continue
		}
		h := driver.Holder{Name: lockName(lease), Owner: holderOf(lease)}
		if f, ok := grantOf(lease); ok {
			h.Fence, h.Metadata = f, lease.Annotations[annoMeta]
		}
		holders = append(holders, h)
	}
	return holders, nil
}

// ForceRelease implements driver.ForceReleaser: the Lease is left as a
// release leaves it, compared by the resourceVersion read, whoever holds
// it.
func (d *kubeDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	for range conflictRetries {
		lease, err := d.leases.Get(ctx, leaseName(name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if holderOf(lease) == "" {
			return false, nil
		}
		free(lease)
		if _, err = d.write(ctx, lease); !errors.Is(err, errConflict) {
			return err == nil, err
		}
	}
	return false, errConflict
}

// Classify implements driver.Classifier: ErrorDenied for the apiserver's
// 401 and 403, ErrorTransient for a server that is unavailable, busy, did
// not answer in time, or could not be reached.
func (d *kubeDriver) Classify(err error) driver.ErrorKind { return classify(err) }

func classify(err error) driver.ErrorKind {
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		return driver.ErrorDenied
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), errors.Is(err, errConflict),
		errors.As(err, &netErr):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}
