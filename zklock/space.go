package zklock

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// quotaExceeded is the text of the error the zk client returns for
// ZooKeeper's QuotaExceeded (code -125): the server refuses a create
// beyond a path's hard quota (setquota -N or -B, enforced with
// zookeeper.enforceQuota). The client (go-zookeeper v1.0.4) has no
// sentinel for that code and formats it without wrapping, so its text
// is all there is to match.
const quotaExceeded = "unknown error: -125"

// isQuotaExceeded reports whether err, or an error it wraps, is
// ZooKeeper's QuotaExceeded.
func isQuotaExceeded(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == quotaExceeded {
			return true
		}
	}
	return false
}

// noSpace returns err wrapping dlock.ErrNoSpace too if it is ZooKeeper's
// QuotaExceeded, and err otherwise.
func noSpace(err error) error {
	if isQuotaExceeded(err) {
		return fmt.Errorf("%w: quota exceeded (a hard quota on the path or one above it): %w", dlock.ErrNoSpace, err)
	}
	return err
}
