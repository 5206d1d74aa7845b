package redisconn

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
)

// ClassifyServer says what a server's error reply, msg, means to the core
// (see driver.Classifier), for the adapters of clients whose errors carry
// the reply's text: ErrorNoSpace for a write over maxmemory (OOM),
// ErrorDenied for refused credentials or a command, key or channel the
// ACL user is not granted, ErrorTransient for a server that says to try
// again; anything else is ErrorOther.
func ClassifyServer(msg string) driver.ErrorKind {
	switch {
	case strings.HasPrefix(msg, "OOM "):
		return driver.ErrorNoSpace
	case hasAnyPrefix(msg, deniedPrefixes), strings.Contains(msg, "The user executing the script can't"):
		// The last is Redis 7.0's error for what a script's caller is not
		// granted (7.2 and later say NOPERM).
		return driver.ErrorDenied
	case hasAnyPrefix(msg, TransientPrefixes):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// ClassifyTransport says what an error that is not the server's reply
// means: a refused client certificate is ErrorDenied; a connection that
// failed or timed out is ErrorTransient; anything else ErrorOther.
func ClassifyTransport(err error) driver.ErrorKind {
	var ne net.Error
	switch {
	case err == nil:
		return driver.ErrorOther
	case backend.CertificateRefused(err):
		return driver.ErrorDenied
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// deniedPrefixes begin the server's refusals of credentials and grants.
var deniedPrefixes = []string{"NOAUTH ", "WRONGPASS ", "NOPERM ", "ERR AUTH "}

// TransientPrefixes begin the server's errors that another attempt may
// not meet.
var TransientPrefixes = []string{"LOADING ", "BUSY ", "TRYAGAIN ", "CLUSTERDOWN ", "MASTERDOWN ", "READONLY "}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
