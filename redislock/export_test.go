package redislock

import (
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
)

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }
