package kubelock

import (
	"k8s.io/client-go/kubernetes"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/kubelock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.New = func(cs kubernetes.Interface, namespace string) (*dlock.Locker, driver.Driver, error) {
		d, lcfg, err := newDriver(cs, namespace, nil)
		if err != nil {
			return nil, nil, err
		}
		return dlock.NewLocker(d, lcfg), d, nil
	}
	testhook.LeaseName = leaseName
}
