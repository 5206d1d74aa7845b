package fence

import (
	"errors"
	"fmt"
	"math"

	"github.com/dlock-go/dlock"
)

// ErrStale is wrapped by the error of a write whose token is below the
// highest token that has written the resource: its lock was lost and
// another holder has written since.
var ErrStale = errors.New("fence: stale token")

// checkToken returns an error wrapping dlock.ErrInvalid unless token is
// between 1 and math.MaxInt64.
func checkToken(token uint64) error {
	if token == 0 || token > math.MaxInt64 {
		return fmt.Errorf("fence: token %d is not between 1 and %d: %w", token, uint64(math.MaxInt64), dlock.ErrInvalid)
	}
	return nil
}

// checkWrite checks the arguments every store's write takes.
func checkWrite(resource string, token uint64) error {
	if resource == "" {
		return fmt.Errorf("fence: empty resource name: %w", dlock.ErrInvalid)
	}
	return checkToken(token)
}

// stale returns the error for a write of resource with token refused
// because stored is higher.
func stale(resource string, token, stored uint64) error {
	return fmt.Errorf("fence: write %q: token %d is below %d: %w", resource, token, stored, ErrStale)
}
