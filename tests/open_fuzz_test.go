package backend_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/etcdlock"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/redlock"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/sqllock/mysql"
	_ "github.com/dlock-go/dlock/sqllock/postgres"
	_ "github.com/dlock-go/dlock/zklock"
)

// fuzzSchemes are the schemes FuzzOpenHidesPassword tries: every
// backend's but sqlite:// (its path names a file; it takes no password).
var fuzzSchemes = []string{"mem", "redis", "rediss", "redis+sentinel", "redis+cluster", "redlock",
	"mysql", "postgres", "postgresql", "zk", "etcd", "etcds", "nosuch"}

// FuzzOpenHidesPassword opens URLs with a password, fuzzed around it, on
// every scheme, with a context that has already ended (so nothing is
// dialled: the URL is parsed and checked, then the connection fails at
// once). No error may contain the password, raw or decoded.
func FuzzOpenHidesPassword(f *testing.F) {
	f.Add(uint8(1), "user", "s3cretpw", "/0", "dial_timeout=1s")
	f.Add(uint8(6), "app", "pa%zzss", "/db", "sslmode=verify-full")
	f.Add(uint8(7), "app", "p@ss:w/rd", "/db", "bad=1")
	f.Add(uint8(9), "", "secret99", "/", "session_ttl=x")
	f.Add(uint8(10), "root", "hunter22", "", "prefix=%zz")
	f.Add(uint8(5), "u", "longpassword", "", "addr=127.0.0.1:2&addr=bad host")
	f.Add(uint8(0), "u", "memsecret", "/x", "")
	f.Fuzz(func(t *testing.T, scheme uint8, user, pass, path, query string) {
		if len(pass) < 6 {
			return
		}
		raw := fuzzSchemes[int(scheme)%len(fuzzSchemes)] + "://" + user + ":" + pass + "@127.0.0.1:1" + path
		if query != "" {
			raw += "?" + query
		}
		secrets := []string{pass}
		if dec, err := url.PathUnescape(pass); err == nil && len(dec) >= 6 {
			secrets = append(secrets, dec)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// The same URL with another password, as Open's error renders it
		// (re-escaped, quoted): where the password shows there too, it is
		// also elsewhere in the URL, and there is nothing to tell.
		other := strings.Replace(raw, pass, "Zq9-Zq9-Zq9", 1)
		l, err := dlock.Open(ctx, other)
		if err == nil {
			l.Close()
		}
		for _, s := range secrets {
			if strings.Contains(other, s) || (err != nil && strings.Contains(err.Error(), s)) {
				return
			}
		}
		l, err = dlock.Open(ctx, raw)
		if err == nil {
			l.Close()
			return
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("Open(%q) error shows the password %q: %v", raw, s, err)
			}
		}
	})
}
