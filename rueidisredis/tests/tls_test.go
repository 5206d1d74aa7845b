package rueidisredis_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	_ "github.com/dlock-go/dlock/rueidisredis"
)

// TestOpenTLSAndDenied opens redis+rueidis:// and redlock+rueidis:// over
// TLS with a client certificate, on servers that demand one, as an ACL
// user: the lock works; without tls_ca the server's certificate fails
// verification; a wrong password gets an error wrapping ErrDenied,
// without the password (the adversary: a store reached over a network
// that must not see the traffic, and a caller's wrong secret).
func TestOpenTLSAndDenied(t *testing.T) {
	pki := testserver.NewPKI(t)
	var hosts []string
	for range 3 {
		r := testserver.StartRedisWith(t, testserver.RedisOptions{
			PKI: pki, ClientCerts: true,
			Users: []string{"locker on >pw ~* &* +@all"},
		})
		hosts = append(hosts, r.Addr())
	}
	certs := url.Values{"tls_ca": {pki.CAFile}, "tls_cert": {pki.ClientCert}, "tls_key": {pki.ClientKey}}
	noCA := url.Values{"tls_cert": certs["tls_cert"], "tls_key": certs["tls_key"]}
	// Generous: a refusal is one round trip; only a hang reaches this.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, tc := range []struct{ scheme, host string }{
		{"redis+rueidis", hosts[0]},
		{"redlock+rueidis", strings.Join(hosts, ",")},
	} {
		store := func(pass string, q url.Values) string {
			return (&url.URL{Scheme: tc.scheme, User: url.UserPassword("locker", pass), Host: tc.host, RawQuery: q.Encode()}).String()
		}
		l, err := dlock.Open(ctx, store("pw", certs))
		if err != nil {
			t.Errorf("%s: Open over TLS = %v, want a Locker", tc.scheme, err)
			continue
		}
		if k, err := l.TryAcquire(ctx, "n"); err != nil {
			t.Errorf("%s: TryAcquire over TLS = %v, want a lock", tc.scheme, err)
		} else if err := k.Release(ctx); err != nil {
			t.Errorf("%s: Release over TLS = %v, want nil", tc.scheme, err)
		}
		l.Close()
		if l, err := dlock.Open(ctx, store("pw", noCA)); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			if l != nil {
				l.Close()
			}
			t.Errorf("%s: Open without tls_ca = %v, want a verification failure", tc.scheme, err)
		}
		if l, err := dlock.Open(ctx, store("wrong-pw", certs)); !errors.Is(err, dlock.ErrDenied) || strings.Contains(err.Error(), "wrong-pw") {
			if l != nil {
				l.Close()
			}
			t.Errorf("%s: Open with a wrong password = %v, want ErrDenied without the password", tc.scheme, err)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("the refusals took until the context ended")
	}
}
