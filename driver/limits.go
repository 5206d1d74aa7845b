package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The limits every backend meets and the core enforces before a step
// reaches a driver. Package dlock's documentation states them for
// applications (WithTTL, WithMetadata, WithLockDelay, lock names).
const (
	// DefaultTTL is the lease length when dlock.WithTTL is not given.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest lease dlock.WithTTL accepts.
	MinTTL = 100 * time.Millisecond

	// MaxTTL is the longest lease dlock.WithTTL accepts.
	MaxTTL = 24 * time.Hour

	// MaxNameLen is the longest lock name, in bytes, that every backend
	// stores.
	MaxNameLen = 255

	// MaxMetadataLen is the longest metadata dlock.WithMetadata accepts,
	// in bytes.
	MaxMetadataLen = 1024

	// MaxLockDelay is the longest lock-delay dlock.WithLockDelay accepts.
	MaxLockDelay = time.Hour
)

// The errors below are package dlock's sentinels of the same names
// (dlock.ErrInvalid is ErrInvalid), declared here so that ValidateName and
// StoreError, which backends call, can wrap them.
var (
	// ErrInvalid is wrapped by the errors for bad input: an empty,
	// oversized or malformed name, or an out-of-range option.
	ErrInvalid = errors.New("dlock: invalid argument")

	// ErrDenied is wrapped by the errors of a store that refuses the
	// Locker's credentials, or a step they are not granted.
	ErrDenied = errors.New("dlock: denied by the store")

	// ErrNoSpace is wrapped by the errors of a store that refuses writes
	// for lack of space.
	ErrNoSpace = errors.New("dlock: store out of space")
)

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

// StoreError returns err wrapping ErrDenied or ErrNoSpace when c
// classifies it as ErrorDenied or ErrorNoSpace, keeping err in the chain
// (for errors.As, and its message), and err as it is otherwise. It is the
// one place where a store's errors become those sentinels: a Locker
// applies it to every driver step's error, and a backend calls it for the
// errors it returns outside driver steps, such as a constructor's ping
// that the store refused, so that they read as a Locker's do. A nil c, a
// nil err, an error wrapping ErrNotHeld and one that wraps ErrDenied or
// ErrNoSpace already are returned as they are.
func StoreError(c Classifier, err error) error {
	if err == nil || c == nil || errors.Is(err, ErrNotHeld) ||
		errors.Is(err, ErrDenied) || errors.Is(err, ErrNoSpace) {
		return err
	}
	switch c.Classify(err) {
	case ErrorDenied:
		return fmt.Errorf("%w: %w", ErrDenied, err)
	case ErrorNoSpace:
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// DefaultMinRetryInterval and DefaultMaxRetryInterval are
// LockerOptions' defaults.
const (
	DefaultMinRetryInterval = 5 * time.Millisecond
	DefaultMaxRetryInterval = 2 * time.Second
)

// LockerOptions tunes the Locker dlock.NewLocker makes. Backend
// constructors fill it from their own Options; the zero value means
// defaults.
type LockerOptions struct {
	// MinRetryInterval is the first wait between attempts of a waiter on a
	// backend that cannot notify; it doubles up to MaxRetryInterval.
	// Default: DefaultMinRetryInterval (also when negative).
	MinRetryInterval time.Duration

	// MaxRetryInterval bounds the wait between attempts when no wake-up
	// arrives (a lost notification, or a polling backend). A waiter never
	// waits longer than the holder's remaining lease either. A value
	// below MinRetryInterval is raised to it. Default:
	// DefaultMaxRetryInterval (also when negative).
	MaxRetryInterval time.Duration
}
