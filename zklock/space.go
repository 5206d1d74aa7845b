package zklock

import (
	"errors"
	"fmt"
	"slices"
)

// quotaExceeded is the text of the error the zk client returns for
// ZooKeeper's QuotaExceeded (code -125): the server refuses a create
// beyond a path's hard quota (setquota -N or -B, enforced with
// zookeeper.enforceQuota). The client (go-zookeeper v1.0.4) has no
// sentinel for that code and formats it without wrapping, so its text
// is all there is to match.
const quotaExceeded = "unknown error: -125"

// isQuotaExceeded reports whether err, or an error in the tree it wraps,
// is ZooKeeper's QuotaExceeded.
func isQuotaExceeded(err error) bool {
	if err == nil {
		return false
	}
	if err.Error() == quotaExceeded {
		return true
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.ContainsFunc(m.Unwrap(), isQuotaExceeded)
	}
	return isQuotaExceeded(errors.Unwrap(err))
}

// explainQuota returns err saying what it means if it is ZooKeeper's
// QuotaExceeded (whose text does not), and err otherwise. Either way
// Classify finds it ErrorNoSpace, and the Locker wraps dlock.ErrNoSpace.
func explainQuota(err error) error {
	if isQuotaExceeded(err) {
		return fmt.Errorf("quota exceeded (a hard quota on the path or one above it): %w", err)
	}
	return err
}
