package dlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrBadURL is wrapped by the errors Open returns for a malformed store
// URL, an unknown scheme or an unknown query parameter.
var ErrBadURL = errors.New("dlock: bad store URL")

// OpenFunc opens a Locker on the store a parsed URL names. Backends
// register one per scheme with Register. The Locker it returns owns the
// clients it created: its Close closes them.
type OpenFunc func(ctx context.Context, u *url.URL) (*Locker, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]OpenFunc{}
)

// Register makes a store URL scheme available to Open. Backend packages
// call it from init, so importing a backend registers its schemes, as
// database/sql drivers do. It panics if scheme is registered twice or
// open is nil: both are programming errors, not input.
func Register(scheme string, open OpenFunc) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if open == nil {
		panic("dlock: Register open func is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("dlock: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes returns the registered store URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s := make([]string, 0, len(registry))
	for k := range registry {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open returns a Locker on the store rawURL names, such as
// "redis://localhost:6379/0" or "sqlite:///var/lib/app/locks.db". The
// scheme's backend package must be imported (for its registration).
// Errors never contain the URL's password.
func Open(ctx context.Context, rawURL string) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the input, password included: say less.
		return nil, fmt.Errorf("%w: cannot parse %q: %v", ErrBadURL, RedactURL(rawURL), unwrapURLError(err))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want one of %s)", ErrBadURL, RedactURL(rawURL), strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w: unknown scheme %q (want one of %s)", ErrBadURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	l, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("dlock: open %s: %w", RedactURL(rawURL), err)
	}
	return l, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// RedactURL returns rawURL with any password replaced by "xxxxx", also
// when rawURL does not parse.
func RedactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if _, has := u.User.Password(); !has {
			return rawURL
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return rawURL
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return rawURL
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// URLParams checks u's query parameters against those a backend knows and
// returns them. The error, wrapping ErrBadURL, names any unknown or
// repeated parameter. Backends call it from their OpenFunc.
func URLParams(u *url.URL, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", ErrBadURL, err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			want := "none"
			if len(known) > 0 {
				want = strings.Join(known, ", ")
			}
			return nil, fmt.Errorf("%w: unknown parameter %q for %s:// (known: %s)", ErrBadURL, k, u.Scheme, want)
		}
		if len(q[k]) > 1 {
			return nil, fmt.Errorf("%w: parameter %q given %d times", ErrBadURL, k, len(q[k]))
		}
	}
	return q, nil
}

// URLHosts returns the comma-separated host:port list of u's host part,
// with defaultPort where a port is missing. The error, wrapping
// ErrBadURL, names a missing host or a bad port. Backends call it from
// their OpenFunc.
func URLHosts(u *url.URL, defaultPort int) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s:// URL has no host", ErrBadURL, u.Scheme)
	}
	var hosts []string
	for _, hp := range strings.Split(u.Host, ",") {
		host, port := hp, strconv.Itoa(defaultPort)
		if h, p, err := net.SplitHostPort(hp); err == nil {
			host, port = h, p
		} else if strings.Count(hp, ":") == 1 { // "host:" or ":port"
			host, port, _ = strings.Cut(hp, ":")
		}
		if host == "" {
			return nil, fmt.Errorf("%w: missing host in %q", ErrBadURL, hp)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: bad port %q for host %q", ErrBadURL, port, host)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}

// URLPassword returns u's password, or the DLOCK_PASSWORD environment
// variable when u has none, so passwords can stay out of command lines.
func URLPassword(u *url.URL) string {
	if p, ok := u.User.Password(); ok {
		return p
	}
	return os.Getenv("DLOCK_PASSWORD")
}
