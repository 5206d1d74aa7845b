package redlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	_ "github.com/dlock-go/dlock/redlock"
)

// TestOpenTLSAndDenied opens redlock:// over TLS with a client certificate
// on three masters that demand one, as an ACL user: the lock works; a
// missing tls_ca fails verification, and a wrong password or a user
// without the lock keys gets an error wrapping ErrDenied, at once.
func TestOpenTLSAndDenied(t *testing.T) {
	pki := testserver.NewPKI(t)
	var hosts []string
	for range 3 {
		r := testserver.StartRedisWith(t, testserver.RedisOptions{
			PKI: pki, ClientCerts: true,
			Users: []string{"locker on >pw ~redlock:* &* +@all", "nokeys on >pw ~other:* &* +@all"},
		})
		hosts = append(hosts, r.Addr())
	}
	certs := url.Values{"tls_ca": {pki.CAFile}, "tls_cert": {pki.ClientCert}, "tls_key": {pki.ClientKey}}
	store := func(user, pass string, q url.Values) string {
		return (&url.URL{Scheme: "redlock", User: url.UserPassword(user, pass), Host: strings.Join(hosts, ","), RawQuery: q.Encode()}).String()
	}
	// Generous: a refusal is one round trip; only a hang reaches this.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	l, err := dlock.Open(ctx, store("locker", "pw", certs))
	if err != nil {
		t.Fatalf("Open over TLS = %v, want a Locker", err)
	}
	k, err := l.TryAcquire(ctx, "n")
	if err != nil {
		t.Fatalf("TryAcquire over TLS = %v, want a lock", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Errorf("Release over TLS = %v, want nil", err)
	}
	l.Close()

	noCA := url.Values{"tls_cert": certs["tls_cert"], "tls_key": certs["tls_key"]}
	if _, err := dlock.Open(ctx, store("locker", "pw", noCA)); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("Got(Open without tls_ca) = %v, want a verification failure", err)
	}
	if _, err := dlock.Open(ctx, store("locker", "wrong-pw", certs)); !errors.Is(err, dlock.ErrDenied) || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("Got(Open with a wrong password) = %v, want ErrDenied without the password", err)
	}
	l, err = dlock.Open(ctx, store("nokeys", "pw", certs))
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
