package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
)

// NewDriver returns the driver New wraps, with pause (if not nil) called by
// Acquire after the token is written back and before validity is checked.
func NewDriver(clients []redis.UniversalClient, opts *Options, pause func()) (driver.Driver, error) {
	d, err := newDriver(clients, opts)
	if err != nil {
		return nil, err
	}
	d.pause = pause
	return d, nil
}

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }
