package dlock

import (
	"fmt"
	"time"
	"unicode/utf8"
)

const (
	// DefaultTTL is the lease length when WithTTL is not given.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest lease WithTTL accepts.
	MinTTL = 100 * time.Millisecond

	// MaxTTL is the longest lease WithTTL accepts.
	MaxTTL = 24 * time.Hour
)

// Option configures one Acquire or TryAcquire call.
type Option func(*acquireOptions)

type acquireOptions struct {
	ttl      time.Duration
	noRenew  bool
	metadata string
}

// MaxMetadataLen is the longest metadata WithMetadata accepts, in bytes.
const MaxMetadataLen = 1024

// WithMetadata stores a short description of the holder with the lock
// (for example "host=web1 pid=4242"), which Inspect and "dlock status"
// show, on backends that can store it. It must be valid UTF-8 of at most
// MaxMetadataLen bytes. Default: none.
func WithMetadata(s string) Option {
	return func(o *acquireOptions) { o.metadata = s }
}

// WithTTL sets the lease length: the lock expires on the server this long
// after it was taken or last renewed. It must be between MinTTL and
// MaxTTL. Default: DefaultTTL.
func WithTTL(d time.Duration) Option {
	return func(o *acquireOptions) { o.ttl = d }
}

// WithoutRenewal turns off automatic renewal: the lease ends TTL after
// acquisition unless Lock.Refresh is called, and Lock.Done closes shortly
// before it ends. Default: locks are renewed every TTL/3 until released.
func WithoutRenewal() Option {
	return func(o *acquireOptions) { o.noRenew = true }
}

func buildOptions(opts []Option) (acquireOptions, error) {
	o := acquireOptions{ttl: DefaultTTL}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.ttl < MinTTL || o.ttl > MaxTTL {
		return o, fmt.Errorf("ttl %v out of range [%v, %v]: %w", o.ttl, MinTTL, MaxTTL, ErrInvalid)
	}
	if len(o.metadata) > MaxMetadataLen || !utf8.ValidString(o.metadata) {
		return o, fmt.Errorf("metadata must be valid UTF-8 of at most %d bytes: %w", MaxMetadataLen, ErrInvalid)
	}
	return o, nil
}
