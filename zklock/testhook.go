package zklock

import (
	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.Wakeups = wakeups.Load
	testhook.New = func(conn *zk.Conn) (*dlock.Locker, driver.Driver, error) {
		return newLocker(conn, nil, false)
	}
	testhook.Queued = func(conn *zk.Conn, name string) int {
		kids, _, err := conn.Children(Key("", name))
		if err != nil {
			return 0
		}
		kids, modes := queueOf(kids)
		return len(kids) - sessionlock.Holding(modes)
	}
}
