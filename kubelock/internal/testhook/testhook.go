// Package testhook gives kubelock's test module (kubelock/tests) what it
// checks of kubelock's internals. kubelock sets the variables in its init;
// no program outside kubelock's directory can import this package.
package testhook

import (
	"k8s.io/client-go/kubernetes"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

var (
	// New is kubelock.New(cs, namespace, nil), also returning the driver
	// under the Locker, for dlocktest's Harness.LockerAndDriver.
	New func(cs kubernetes.Interface, namespace string) (*dlock.Locker, driver.Driver, error)

	// LeaseName is the name of the Lease that holds a lock name.
	LeaseName func(name string) string
)
