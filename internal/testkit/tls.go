package testkit

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

// CheckTLSAndDenied opens the store that store(password, q) names, whose
// server demands TLS with a client certificate and knows a user with
// password "pw"; certs are the TLS parameters that trust its authority and
// present the client certificate. It checks three things, each as an
// error of the test named by what: with certs and "pw" a lock is taken
// and released; without tls_ca, Open fails the server's certificate; with
// a wrong password, Open fails with an error wrapping dlock.ErrDenied
// that does not show the password. The adversaries: a network that must
// not see the traffic, and a caller's wrong secret.
func CheckTLSAndDenied(t testing.TB, ctx context.Context, what string, certs url.Values, store func(password string, q url.Values) string) {
	t.Helper()
	if l, err := dlock.Open(ctx, store("pw", certs)); err != nil {
		t.Errorf("%s: Open over TLS = %v, want a Locker", what, err)
	} else {
		if k, err := l.TryAcquire(ctx, "n"); err != nil {
			t.Errorf("%s: TryAcquire over TLS = %v, want a lock", what, err)
		} else if err := k.Release(ctx); err != nil {
			t.Errorf("%s: Release over TLS = %v, want nil", what, err)
		}
		l.Close()
	}
	noCA := url.Values{}
	for k, v := range certs {
		if k != "tls_ca" {
			noCA[k] = v
		}
	}
	if l, err := dlock.Open(ctx, store("pw", noCA)); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		if l != nil {
			l.Close()
		}
		t.Errorf("%s: Open without tls_ca = %v, want a verification failure", what, err)
	}
	if l, err := dlock.Open(ctx, store("wrong-pw", certs)); !errors.Is(err, dlock.ErrDenied) || strings.Contains(err.Error(), "wrong-pw") {
		if l != nil {
			l.Close()
		}
		t.Errorf("%s: Open with a wrong password = %v, want ErrDenied without the password", what, err)
	}
}
