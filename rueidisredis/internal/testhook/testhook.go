// Package testhook gives rueidisredis's test module (rueidisredis/tests)
// the adapter's redisconn.Conn, to build Lockers whose driver the
// conformance suite also gets. rueidisredis sets it in its init.
package testhook

import (
	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock/internal/redisconn"
)

// Conn returns the adapter's redisconn.Conn on c.
var Conn func(c rueidis.Client) redisconn.Conn

// Masters returns the adapter's redisconn.Conn on each of clients, for
// redisconn.NewRedlock.
var Masters func(clients []rueidis.Client) ([]redisconn.Conn, error)
