// Package lockmode names a hold's mode the one way dlock's errors and
// hook.Slog's records both write it.
package lockmode

import "fmt"

// String returns "exclusive", "shared" or "a permit of a semaphore of N".
func String(shared bool, limit int) string {
	switch {
	case limit > 0:
		return fmt.Sprintf("a permit of a semaphore of %d", limit)
	case shared:
		return "shared"
	default:
		return "exclusive"
	}
}
