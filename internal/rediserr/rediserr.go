// Package rediserr tells, for redislock and redlock, a Redis server's
// refusal (credentials, ACL, client certificate) from other errors.
package rediserr

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// Denied returns err wrapped with dlock.ErrDenied if it is the server
// refusing the client's credentials (NOAUTH, WRONGPASS, a TLS client
// certificate it does not accept) or a command, key or channel its ACL
// user is not granted (NOPERM, or its wording inside a script), and err
// otherwise. Every step's error goes through it, so a missing grant is an
// error the caller can tell from a network fault, not a retry.
func Denied(err error) error {
	if err == nil || errors.Is(err, dlock.ErrDenied) {
		return err
	}
	var re redis.Error
	var alert *net.OpError
	switch {
	case redis.IsAuthError(err), redis.IsPermissionError(err):
	case errors.As(err, &re) && strings.Contains(re.Error(), "The user executing the script can't"):
		// Redis 7.0's error for a command, key or channel a script's
		// caller is not granted (7.2 and later say NOPERM).
	case errors.As(err, &alert) && alert.Op == "remote error" && refusedCert[alert.Err.Error()]:
		// A TLS alert from the server (crypto/tls's alert type is
		// unexported; its text is fixed).
	default:
		return err
	}
	return fmt.Errorf("%w: %w", dlock.ErrDenied, err)
}

// refusedCert holds crypto/tls's texts of the alerts by which a server
// refuses the client's certificate (RFC 8446 section 6.2).
var refusedCert = map[string]bool{
	"tls: bad certificate":               true,
	"tls: unsupported certificate":       true,
	"tls: revoked certificate":           true,
	"tls: expired certificate":           true,
	"tls: unknown certificate":           true,
	"tls: unknown certificate authority": true,
	"tls: access denied":                 true,
	"tls: certificate required":          true,
}
