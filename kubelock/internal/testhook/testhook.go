// Package testhook gives kubelock's test module (kubelock/tests) what it
// checks of kubelock's internals. kubelock sets the variables in its init;
// no program outside kubelock's directory can import this package.
package testhook

import (
	"k8s.io/client-go/rest"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var (
	// New returns a Locker on namespace's Leases through cfg, made as a
	// store URL's is (kubelock's own REST client of Leases), and the
	// driver under it, for dlocktest's Harness.LockerAndDriver.
	New func(cfg *rest.Config, namespace string) (*dlock.Locker, driver.Driver, error)

	// LeaseName is the name of the Lease that holds a lock name.
	LeaseName func(name string) string
)
