package dlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/dlock-go/dlock/internal/redact"
	"github.com/dlock-go/dlock/internal/seam"
)

// ErrBadURL is wrapped by the errors Open returns for a malformed store
// URL, an unknown scheme or an unknown query parameter.
var ErrBadURL = errors.New("dlock: bad store URL")

// Schemes returns the store URL schemes Open accepts in this program,
// sorted: those of the backend packages it imports.
func Schemes() []string { return seam.Schemes() }

// schemePackages names, for each scheme a dlock backend serves, the
// package whose import registers it.
var schemePackages = map[string]string{
	"redis":          "redislock",
	"rediss":         "redislock",
	"redis+sentinel": "redislock",
	"redis+cluster":  "redislock",
	"redlock":        "redlock",
	"mysql":          "sqllock/mysql",
	"postgres":       "sqllock/postgres",
	"postgresql":     "sqllock/postgres",
	"sqlite":         "sqllock",
	"zk":             "zklock",
	"etcd":           "etcdlock",
	"etcds":          "etcdlock",
	"mem":            "memlock",
}

// Open returns a Locker on the store rawURL names, such as
// "redis://localhost:6379/0" or "sqlite:///var/lib/app/locks.db". The
// scheme's backend package must be imported (for its registration), as
// with database/sql drivers:
//
//	import _ "github.com/dlock-go/dlock/redislock"
//
// Open honours ctx: an unreachable store makes it return once ctx ends.
// Errors never contain the URL's password; a malformed URL, an unknown
// scheme or parameter gives an error wrapping ErrBadURL.
func Open(ctx context.Context, rawURL string) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the input, password included: say less.
		return nil, fmt.Errorf("%w: cannot parse %q: %v", ErrBadURL, redact.URL(rawURL), redact.Error(unwrapURLError(err), rawURL))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (%s)", ErrBadURL, redact.URL(rawURL), registered())
	}
	open, _ := seam.Lookup(u.Scheme).(func(context.Context, *url.URL) (*Locker, error))
	if open == nil {
		if pkg := schemePackages[u.Scheme]; pkg != "" {
			return nil, fmt.Errorf("%w: scheme %q needs its backend: import _ \"github.com/dlock-go/dlock/%s\" (%s)", ErrBadURL, u.Scheme, pkg, registered())
		}
		return nil, fmt.Errorf("%w: unknown scheme %q (%s)", ErrBadURL, u.Scheme, registered())
	}
	l, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("dlock: open %s: %w", redact.URL(rawURL), redact.Error(err, rawURL))
	}
	return l, nil
}

func registered() string {
	s := Schemes()
	if len(s) == 0 {
		return "no backend is imported"
	}
	return "registered: " + strings.Join(s, ", ")
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
