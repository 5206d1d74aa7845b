package redislock

import (
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// init gives the adapters of other clients (rueidisredis, valkeyredis)
// the constructor on a redisconn.Conn (see redisconn.NewRedislock).
func init() {
	redisconn.NewRedislock = func(c redisconn.Conn, opts any, own bool) (*dlock.Locker, driver.Driver, error) {
		o, ok := opts.(*Options)
		if !ok && opts != nil {
			return nil, nil, fmt.Errorf("redislock: new: options are a %T, not a *redislock.Options: %w", opts, dlock.ErrInvalid)
		}
		return newConnLocker(c, o, own)
	}
}
