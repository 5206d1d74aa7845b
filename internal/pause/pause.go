// Package pause waits without outliving a context: the backends' retry
// loops use it between attempts.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; it reports whether the whole of d passed
// (false: ctx ended first).
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
