package zklock

import (
	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/seam"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// Wakeups returns how many times a queued waiter has been woken by a watch
// event since the process started.
func Wakeups() int64 { return wakeups.Load() }

// Queued returns how many children of the lock on name (under
// DefaultPrefix) wait: all but those that hold, whatever their modes.
func Queued(conn *zk.Conn, name string) int {
	kids, _, err := conn.Children(Key("", name))
	if err != nil {
		return 0
	}
	kids, modes := queueOf(kids)
	return len(kids) - sessionlock.Holding(modes)
}

// DriverOf returns the driver l runs on, for dlocktest's
// Harness.LockerAndDriver.
func DriverOf(l *dlock.Locker) driver.Driver { return seam.LockerDriver(l) }
