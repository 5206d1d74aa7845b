package redlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	_ "github.com/dlock-go/dlock/redlock"
)

// TestOpenTLSAndDenied opens redlock:// over TLS with a client certificate
// on three masters that demand one, as an ACL user: the lock works; a
// missing tls_ca fails verification, and a wrong password or a user
// without the lock keys gets an error wrapping ErrDenied, at once.
func TestOpenTLSAndDenied(t *testing.T) {
	pki := testserver.NewPKI(t)
	hosts := testserver.StartRedisMasters(t, 3, testserver.RedisOptions{PKI: pki, ClientCerts: true, Users: []string{"locker on >pw ~redlock:* &* +@all", "nokeys on >pw ~other:* &* +@all"}})
	certs := pki.ClientParams()
	store := func(user, pass string, q url.Values) string {
		return (&url.URL{Scheme: "redlock", User: url.UserPassword(user, pass), Host: strings.Join(hosts, ","), RawQuery: q.Encode()}).String()
	}
	// Generous: a refusal is one round trip; only a hang reaches this.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	testkit.CheckTLSAndDenied(t, ctx, "redlock", certs, func(pass string, q url.Values) string { return store("locker", pass, q) })
	l, err := dlock.Open(ctx, store("nokeys", "pw", certs))
	if err != nil {
		t.Fatalf("Open as nokeys = %v, want a Locker", err)
	}
	defer l.Close()
	if _, err := l.TryAcquire(ctx, "n"); !errors.Is(err, dlock.ErrDenied) {
		t.Errorf("Got(TryAcquire as a user without the lock keys) = %v, want ErrDenied", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the refusals took until the context ended")
	}
}
