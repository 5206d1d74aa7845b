package redislock

import "github.com/dlock-go/dlock/internal/goredis/rediserr"

// denied wraps the server's refusals with dlock.ErrDenied (see
// rediserr.Denied).
func denied(err error) error { return rediserr.Denied(err) }
