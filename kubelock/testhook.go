package kubelock

import (
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/kubelock/internal/testhook"
	"k8s.io/client-go/rest"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.New = func(cfg *rest.Config, namespace string) (*dlock.Locker, driver.Driver, error) {
		leases, err := newRESTLeases(cfg, namespace)
		if err != nil {
			return nil, nil, err
		}
		d, lcfg, err := newDriver(leases, nil)
		if err != nil {
			return nil, nil, err
		}
		return dlock.NewLocker(d, lcfg), d, nil
	}
	testhook.LeaseName = leaseName
}
