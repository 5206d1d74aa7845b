// Package rediserr tells, for redislock and redlock, a Redis server's
// refusals (credentials, ACL, client certificate; writes over maxmemory)
// and its transient failures from other errors: their drivers'
// driver.Classifier.
package rediserr

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// Classify says what err means to the core. ErrorNoSpace: a write
// refused because the server is over its maxmemory with the noeviction
// policy (an "OOM" error). ErrorDenied: the server refusing the client's
// credentials (NOAUTH, WRONGPASS, a TLS client certificate it does not
// accept) or a command, key or channel its ACL user is not granted
// (NOPERM, or its wording inside a script), so that a missing grant is an
// error the caller can tell from a network fault, not a retry.
// ErrorTransient: a connection that failed or timed out, and a server
// that says to try again (loading its data set, busy with a script, a
// cluster slot moving or down, a replica read-only after a failover).
// Anything else is ErrorOther.
func Classify(err error) driver.ErrorKind {
	if err == nil {
		return driver.ErrorOther
	}
	var re redis.Error
	isRedis := errors.As(err, &re)
	switch {
	case isRedis && strings.HasPrefix(re.Error(), "OOM "):
		return driver.ErrorNoSpace
	case redis.IsAuthError(err), redis.IsPermissionError(err), backend.CertificateRefused(err):
		return driver.ErrorDenied
	case isRedis && strings.Contains(re.Error(), "The user executing the script can't"):
		// Redis 7.0's error for a command, key or channel a script's
		// caller is not granted (7.2 and later say NOPERM).
		return driver.ErrorDenied
	case isRedis && slices.ContainsFunc(redisconn.TransientPrefixes, func(p string) bool { return strings.HasPrefix(re.Error(), p) }):
		return driver.ErrorTransient
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// Classifier is Classify as a driver.Classifier: redislock's and
// redlock's drivers embed it, and their Open passes it to
// driver.StoreError.
type Classifier struct{}

// Classify returns Classify(err).
func (Classifier) Classify(err error) driver.ErrorKind { return Classify(err) }
