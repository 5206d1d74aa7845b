// Package seam joins package dlock to package backend, so that what only
// a backend author needs (making a Locker over a driver, registering a
// URL scheme) lives outside the root package without the root importing
// it. Applications never see it.
package seam

import (
	"sort"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// NewLocker makes a *dlock.Locker over drv. Package dlock sets it in its
// init; package backend, which imports dlock, calls it.
var NewLocker func(drv driver.Driver, minRetry, maxRetry time.Duration) any

// LockerDriver returns the driver a *dlock.Locker runs on, for backends'
// tests that call driver steps on leases a Locker holds. Package dlock
// sets it in its init.
var LockerDriver func(locker any) driver.Driver

var (
	mu      sync.RWMutex
	openers = map[string]any{}
)

// Register records open, a func(context.Context, *url.URL) (*dlock.Locker,
// error), for scheme. It reports false if scheme is taken.
func Register(scheme string, open any) bool {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		return false
	}
	openers[scheme] = open
	return true
}

// Lookup returns what Register recorded for scheme, or nil.
func Lookup(scheme string) any {
	mu.RLock()
	defer mu.RUnlock()
	return openers[scheme]
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
