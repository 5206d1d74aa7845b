// Package backend holds what a dlock backend author needs beyond the
// driver interface: making a *dlock.Locker over a driver, and serving
// store URLs through dlock.Open (registering a scheme, parsing its hosts
// and parameters).
//
// Applications use package dlock and a backend's constructor
// (redislock.New, sqllock.New, ...); they never need this package.
package backend

import (
	"context"
	"net/url"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redact"
	"github.com/dlock-go/dlock/internal/seam"
)

const (
	// DefaultMinRetryInterval is Config.MinRetryInterval's default.
	DefaultMinRetryInterval = 5 * time.Millisecond

	// DefaultMaxRetryInterval is Config.MaxRetryInterval's default.
	DefaultMaxRetryInterval = 2 * time.Second
)

// Config tunes the Locker New makes. Backend constructors fill it from
// their own Options; a nil *Config means defaults.
type Config struct {
	// MinRetryInterval is the first wait between attempts of a waiter on a
	// backend that cannot notify; it doubles up to MaxRetryInterval.
	// Default: DefaultMinRetryInterval.
	MinRetryInterval time.Duration

	// MaxRetryInterval bounds the wait between attempts when no wake-up
	// arrives (a lost notification, or a polling backend). A waiter never
	// waits longer than the holder's remaining lease either.
	// Default: DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker over drv, which implements the contract of package
// dlock (waiting, renewal, the loss signal, reentrancy, validation) on
// top of drv's atomic steps. Backend constructors call it. A nil cfg
// means defaults.
func New(drv driver.Driver, cfg *Config) *dlock.Locker {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MinRetryInterval <= 0 {
		c.MinRetryInterval = DefaultMinRetryInterval
	}
	if c.MaxRetryInterval <= 0 {
		c.MaxRetryInterval = DefaultMaxRetryInterval
	}
	c.MaxRetryInterval = max(c.MaxRetryInterval, c.MinRetryInterval)
	return seam.NewLocker(drv, c.MinRetryInterval, c.MaxRetryInterval).(*dlock.Locker)
}

// OpenFunc opens a Locker on the store a parsed URL names. Backends
// register one per scheme with Register. The Locker it returns owns the
// clients it created: its Close closes them. It must honour ctx: an
// unreachable store makes it return once ctx ends.
type OpenFunc func(ctx context.Context, u *url.URL) (*dlock.Locker, error)

// Register makes a store URL scheme available to dlock.Open. Backend
// packages call it from init, so importing a backend registers its
// schemes, as database/sql drivers do. It panics if scheme is registered
// twice or open is nil: both are programming errors, not input.
func Register(scheme string, open OpenFunc) {
	if open == nil {
		panic("backend: Register open func is nil")
	}
	if !seam.Register(scheme, (func(context.Context, *url.URL) (*dlock.Locker, error))(open)) {
		panic("backend: Register called twice for scheme " + scheme)
	}
}

// RedactURL returns rawURL with any password replaced by "xxxxx", also
// when rawURL does not parse.
func RedactURL(rawURL string) string { return redact.URL(rawURL) }
