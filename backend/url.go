package backend

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
)

// URLParams checks u's query parameters against those a backend knows and
// returns them. The error, wrapping dlock.ErrBadURL, names any unknown or
// repeated parameter. Backends call it from their OpenFunc.
func URLParams(u *url.URL, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", dlock.ErrBadURL, err)
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
			return nil, fmt.Errorf("%w: unknown parameter %q for %s:// (known: %s)", dlock.ErrBadURL, k, u.Scheme, want)
		}
		if len(q[k]) > 1 {
			return nil, fmt.Errorf("%w: parameter %q given %d times", dlock.ErrBadURL, k, len(q[k]))
		}
	}
	return q, nil
}

// URLHosts returns the comma-separated host:port list of u's host part,
// with defaultPort where a port is missing. The error, wrapping
// dlock.ErrBadURL, names a missing host or a bad port. Backends call it
// from their OpenFunc.
func URLHosts(u *url.URL, defaultPort int) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s:// URL has no host", dlock.ErrBadURL, u.Scheme)
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
			return nil, fmt.Errorf("%w: missing host in %q", dlock.ErrBadURL, hp)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: bad port %q for host %q", dlock.ErrBadURL, port, host)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}

// URLPassword returns u's password, or "" if it has none. It reads only
// the URL: a program that takes passwords from elsewhere (the dlock
// command reads $DLOCK_PASSWORD) puts them in the URL before calling
// dlock.Open.
func URLPassword(u *url.URL) string {
	p, _ := u.User.Password()
	return p
}
