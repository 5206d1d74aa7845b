// Package rediserr tells, for redislock and redlock, a Redis server's
// refusals (credentials, ACL, client certificate; writes over maxmemory)
// from other errors.
package rediserr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// Denied returns err wrapped with dlock.ErrDenied if it is the server
// refusing the client's credentials (NOAUTH, WRONGPASS, a TLS client
// certificate it does not accept) or a command, key or channel its ACL
// user is not granted (NOPERM, or its wording inside a script), and err
// otherwise. Every step's error goes through it, so a missing grant is an
// error the caller can tell from a network fault, not a retry. A write
// refused because the server is over its maxmemory with the noeviction
// policy (an "OOM" error) is wrapped with dlock.ErrNoSpace instead.
func Denied(err error) error {
	if err == nil || errors.Is(err, dlock.ErrDenied) || errors.Is(err, dlock.ErrNoSpace) {
		return err
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ") {
		return fmt.Errorf("%w: %w", dlock.ErrNoSpace, err)
	}
	switch {
	case redis.IsAuthError(err), redis.IsPermissionError(err), backend.CertificateRefused(err):
	case errors.As(err, &re) && strings.Contains(re.Error(), "The user executing the script can't"):
		// Redis 7.0's error for a command, key or channel a script's
		// caller is not granted (7.2 and later say NOPERM).
	default:
		return err
	}
	return fmt.Errorf("%w: %w", dlock.ErrDenied, err)
}
