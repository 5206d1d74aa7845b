package dlock

import (
	"context"
	"errors"
)

// ErrBadURL is wrapped by the errors Open returns for a malformed store
// URL, an unknown scheme or an unknown query parameter.
var ErrBadURL = errors.New("dlock: bad store URL")

// Open returns a Locker on the store rawURL names, such as
// "redis://localhost:6379/0" or "sqlite:///var/lib/app/locks.db". The
// scheme's backend package must be imported (for its registration), as
// with database/sql drivers:
//
//	import _ "github.com/dlock-go/dlock/redislock"
//
// Open honours ctx: an unreachable store makes it return once ctx ends.
// Errors never contain the URL's password; a malformed URL, an unknown
// scheme or parameter gives an error wrapping ErrBadURL. Open is
// DefaultURLMux().Open.
func Open(ctx context.Context, rawURL string) (*Locker, error) {
	return defaultURLMux.Open(ctx, rawURL)
}
