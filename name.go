package dlock

import (
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// validateName is driver.ValidateName: 1 to 255 bytes of valid UTF-8
// without NUL bytes, or an error wrapping ErrInvalid.
func validateName(name string) error { return driver.ValidateName(name) }

// quote formats a name for error messages, shortening very long ones.
func quote(name string) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q...(%d bytes)", name[:max], len(name))
	}
	return fmt.Sprintf("%q", name)
}
