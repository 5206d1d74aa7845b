package rueidisredis_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
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
	hosts := testserver.StartRedisMasters(t, 3, testserver.RedisOptions{PKI: pki, ClientCerts: true, Users: []string{"locker on >pw ~* &* +@all"}})
	certs := pki.ClientParams()
	// Generous: a refusal is one round trip; only a hang reaches this.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, tc := range []struct{ scheme, host string }{
		{"redis+rueidis", hosts[0]},
		{"redlock+rueidis", strings.Join(hosts, ",")},
	} {
		testkit.CheckTLSAndDenied(t, ctx, tc.scheme, certs, func(pass string, q url.Values) string {
			return (&url.URL{Scheme: tc.scheme, User: url.UserPassword("locker", pass), Host: tc.host, RawQuery: q.Encode()}).String()
		})
	}
	if ctx.Err() != nil {
		t.Errorf("the refusals took until the context ended")
	}
}
