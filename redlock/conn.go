package redlock

import (
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// init gives the adapters of other clients (rueidisredis, valkeyredis)
// the constructor on one redisconn.Conn per master (see
// redisconn.NewRedlock).
func init() {
	redisconn.NewRedlock = func(masters []redisconn.Conn, opts any, own bool) (*dlock.Locker, driver.Driver, error) {
		o, ok := opts.(*Options)
		if !ok && opts != nil {
			return nil, nil, fmt.Errorf("redlock: new: options are a %T, not a *redlock.Options: %w", opts, dlock.ErrInvalid)
		}
		d, err := newDriver(masters, o)
		if err != nil {
			return nil, nil, err
		}
		d.own = own
		return d.locker(), d, nil
	}
}
