package zklock

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// errorKinds is ZooKeeper's driver.Classifier, embedded in zkDriver.
type errorKinds struct{}

// Classify implements driver.Classifier: ErrorNoSpace for a create
// beyond a hard quota (see isQuotaExceeded); ErrorDenied for NoAuth (the
// connection's identity lacks a permission the znode's ACL requires) and
// a failed authentication; ErrorTransient for a connection or session
// that is gone or moved, no server to talk to, and a step's context that
// ended. It is the one definition of "transient" for this driver: the
// create retries, the reaping of orphans and the queued waiters ask it.
func (errorKinds) Classify(err error) driver.ErrorKind {
	switch {
	case err == nil:
		return driver.ErrorOther
	case isQuotaExceeded(err):
		return driver.ErrorNoSpace
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed):
		return driver.ErrorDenied
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// transient reports whether err may go away on a new attempt.
func transient(err error) bool {
	return errorKinds{}.Classify(err) == driver.ErrorTransient
}
