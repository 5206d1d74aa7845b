// Package fencerule is the fencing rule of package fence, written once for
// every fenced store: fence's Guard and Update, and the stores that live
// with their clients (redislock.Fence, etcdlock.Fence,
// sqllock.FenceTable). It checks a write's arguments and builds the error
// of a stale write; each store compares tokens in its own atomic step.
//
// Every function takes prefix, the start of its error messages (such as
// "fence" or "redislock: fence"), so an error names the package that
// returned it.
package fencerule

import (
	"errors"
	"fmt"
	"math"

	"github.com/dlock-go/dlock"
)

// ErrStale is fence.ErrStale: package fence exports this value.
var ErrStale = errors.New("fence: stale token")

// CheckToken returns an error wrapping dlock.ErrInvalid unless token is
// between 1 and math.MaxInt64, the range every dlock backend issues and a
// SQL BIGINT holds.
func CheckToken(prefix string, token uint64) error {
	if token == 0 || token > math.MaxInt64 {
		return fmt.Errorf("%s: token %d is not between 1 and %d: %w", prefix, token, uint64(math.MaxInt64), dlock.ErrInvalid)
	}
	return nil
}

// CheckWrite checks the arguments every store's write takes: a resource
// name that is not empty and a valid token.
func CheckWrite(prefix, resource string, token uint64) error {
	if resource == "" {
		return fmt.Errorf("%s: empty resource name: %w", prefix, dlock.ErrInvalid)
	}
	return CheckToken(prefix, token)
}

// Stale returns the error, wrapping ErrStale, of a write of resource with
// token, refused because the store holds the higher token stored.
func Stale(prefix, resource string, token, stored uint64) error {
	return fmt.Errorf("%s: write %q: token %d is below %d: %w", prefix, resource, token, stored, ErrStale)
}

// PlainName reports whether name is a plain SQL identifier (a letter or
// underscore, then letters, digits and underscores, 63 bytes at most) or,
// if qualified is true, also two of them joined by a dot (schema.table).
// Such a name can be written into a statement without quoting.
func PlainName(name string, qualified bool) bool {
	if qualified {
		for i := range len(name) {
			if name[i] == '.' {
				return plain(name[:i]) && plain(name[i+1:])
			}
		}
	}
	return plain(name)
}

// plain reports whether s is one unqualified plain identifier.
func plain(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
