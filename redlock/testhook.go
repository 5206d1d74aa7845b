package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.NewDriver = func(clients []redis.UniversalClient, pause func()) (driver.Driver, error) {
		d, err := newGoRedisDriver(clients, nil)
		if err != nil {
			return nil, err
		}
		d.pause = pause
		return d, nil
	}
	testhook.New = func(clients []redis.UniversalClient) (*dlock.Locker, driver.Driver, error) {
		d, err := newGoRedisDriver(clients, nil)
		if err != nil {
			return nil, nil, err
		}
		return d.locker(), d, nil
	}
	testhook.Scripts = scripts
	testhook.MasterOptions = func(addr string) *redis.Options { return masterOptions(addr, "", "", nil) }
}
