// Package backend holds what a dlock backend author needs beyond the
// driver interface and dlock.NewLocker: serving store URLs through
// dlock.Open (registering a scheme, parsing its hosts and parameters).
//
// Applications use package dlock and a backend's constructor
// (redislock.New, sqllock.New, ...); they never need this package.
package backend

import (
	"context"
	"net/url"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redact"
)

// OpenFunc opens a Locker on the store a parsed URL names. Backends
// register one per scheme with Register. The Locker it returns owns the
// clients it created: its Close closes them. It must honour ctx: an
// unreachable store makes it return once ctx ends.
type OpenFunc func(ctx context.Context, u *url.URL) (*dlock.Locker, error)

// Register makes a store URL scheme available to dlock.Open: it is
// dlock.DefaultURLMux().Register. Backend packages call it from init, so
// importing a backend registers its schemes, as database/sql drivers do.
// It panics if scheme is registered twice or open is nil: both are
// programming errors, not input.
func Register(scheme string, open OpenFunc) { dlock.DefaultURLMux().Register(scheme, open) }

// RedactURL returns rawURL with any password replaced by "xxxxx", also
// when rawURL does not parse.
func RedactURL(rawURL string) string { return redact.URL(rawURL) }
