package dlock

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name, in bytes, that every backend stores.
const MaxNameLen = 255

// ValidateName reports whether name is a valid lock name: 1 to MaxNameLen
// bytes of valid UTF-8 without NUL bytes. The error wraps ErrInvalid.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty lock name: %w", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("lock name of %d bytes exceeds %d: %w", len(name), MaxNameLen, ErrInvalid)
	case !utf8.ValidString(name):
		return fmt.Errorf("lock name %q is not valid UTF-8: %w", name, ErrInvalid)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("lock name %q contains a NUL byte: %w", name, ErrInvalid)
	}
	return nil
}

// quote formats a name for error messages, shortening very long ones.
func quote(name string) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q...(%d bytes)", name[:max], len(name))
	}
	return fmt.Sprintf("%q", name)
}
