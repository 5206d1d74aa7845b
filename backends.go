package dlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redact"
)

// What this file declares is for backend packages (redislock, sqllock,
// ...) and for programs that keep store URL schemes of their own:
// applications make Lockers with a backend's constructor or with Open.

// NewLocker returns a Locker over drv, which implements the contract of
// this package (waiting, renewal, the loss signal, reentrancy,
// validation) on top of drv's atomic steps. It is for backend packages,
// whose constructors call it: applications call a backend's constructor,
// such as redislock.New, or [Open].
func NewLocker(drv driver.Driver, opts driver.LockerOptions) *Locker {
	if opts.MinRetryInterval <= 0 {
		opts.MinRetryInterval = driver.DefaultMinRetryInterval
	}
	if opts.MaxRetryInterval <= 0 {
		opts.MaxRetryInterval = driver.DefaultMaxRetryInterval
	}
	return newLocker(drv, opts.MinRetryInterval, max(opts.MaxRetryInterval, opts.MinRetryInterval))
}

// URLMux maps store URL schemes to the functions that open them
// (backend.OpenFunc). [Open]
// uses the one [DefaultURLMux] returns, where backend packages register
// their schemes; a program or a test can keep a URLMux of its own, which
// knows only the schemes registered on it. The zero value is an empty
// URLMux, ready to use. A URLMux is safe for concurrent use.
type URLMux struct {
	mu      sync.RWMutex
	openers map[string]func(context.Context, *url.URL) (*Locker, error)
}

var defaultURLMux URLMux

// DefaultURLMux returns the URLMux that Open uses, and on
// which backend packages register their schemes when imported.
func DefaultURLMux() *URLMux { return &defaultURLMux }

// Register makes scheme open Lockers with open, which must honour ctx (an
// unreachable store makes it return once ctx ends); the Locker it returns
// owns the clients it created, and its Close closes them. It panics if scheme is
// registered twice or open is nil: both are programming errors, not
// input, as with database/sql.Register.
func (m *URLMux) Register(scheme string, open func(ctx context.Context, u *url.URL) (*Locker, error)) {
	if open == nil {
		panic("dlock: Register open func is nil")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.openers[scheme]; dup {
		panic("dlock: Register called twice for scheme " + scheme)
	}
	if m.openers == nil {
		m.openers = make(map[string]func(context.Context, *url.URL) (*Locker, error))
	}
	m.openers[scheme] = open
}

// schemes returns the schemes registered on m, sorted.
func (m *URLMux) schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := make([]string, 0, len(m.openers))
	for k := range m.openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open returns a Locker on the store rawURL names, by the function
// registered on m for its scheme; the package's [Open] is
// DefaultURLMux().Open. Errors never contain the URL's password; a
// malformed URL, an unknown scheme or parameter gives an error wrapping
// ErrBadURL.
func (m *URLMux) Open(ctx context.Context, rawURL string) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the input, password included: say less.
		return nil, fmt.Errorf("%w: cannot parse %q: %v", ErrBadURL, redact.URL(rawURL), redact.Error(unwrapURLError(err), rawURL))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (%s)", ErrBadURL, redact.URL(rawURL), m.registered())
	}
	m.mu.RLock()
	open := m.openers[u.Scheme]
	m.mu.RUnlock()
	if open == nil {
		if pkg := schemePackages[u.Scheme]; pkg != "" && m == &defaultURLMux {
			return nil, fmt.Errorf("%w: scheme %q needs its backend: import _ \"github.com/dlock-go/dlock/%s\" (%s)", ErrBadURL, u.Scheme, pkg, m.registered())
		}
		return nil, fmt.Errorf("%w: unknown scheme %q (%s)", ErrBadURL, u.Scheme, m.registered())
	}
	l, err := open(ctx, u)
	if err != nil {
		return nil, errorf("dlock: open %s: %w", redact.URL(rawURL), redact.Error(err, rawURL))
	}
	return l, nil
}

// registered lists m's schemes for an error message.
func (m *URLMux) registered() string {
	s := m.schemes()
	if len(s) == 0 && m == &defaultURLMux {
		return "no backend is imported"
	}
	if len(s) == 0 {
		return "no scheme is registered"
	}
	return "registered: " + strings.Join(s, ", ")
}

// schemePackages names, for each scheme a dlock backend serves, the
// package whose import registers it on DefaultURLMux.
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

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
