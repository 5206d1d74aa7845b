package dlock

import (
	"fmt"
)

// quote formats a name for error messages, shortening very long ones.
func quote(name string) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q...(%d bytes)", name[:max], len(name))
	}
	return fmt.Sprintf("%q", name)
}
