package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// dlock run on etcd over TLS with a client certificate, as a user whose
// password comes from $DLOCK_PASSWORD; a wrong password is a refusal
// (exit 77) that names it and never the password.
func TestRunEtcdTLSPassword(t *testing.T) {
	p := testserver.NewPKI(t)
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{PKI: p, ClientCertAuth: true, RootPassword: "root-secret"})
	q := p.ClientParams()
	store := (&url.URL{Scheme: "etcds", User: url.User("root"), Host: e.Addr(), Path: "/locks", RawQuery: q.Encode()}).String()

	c := dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", `test -n "$DLOCK_FENCE"`)
	c.Env = append(c.Env, "DLOCK_PASSWORD=root-secret")
	wantCode(t, run(t, c), 0, "run on etcds:// with $DLOCK_PASSWORD")

	c = dlockCmd(t, "run", "--store", store, "job", "--", "true")
	c.Env = append(c.Env, "DLOCK_PASSWORD=wrong-secret")
	r := run(t, c)
	wantCode(t, r, exitDenied, "run on etcds:// with a wrong $DLOCK_PASSWORD")
	if !strings.Contains(r.stderr, "denied access") || !strings.Contains(r.stderr, "authentication failed") || strings.Contains(r.stderr+r.stdout, "wrong-secret") {
		t.Errorf("run with a wrong password: stderr %q, want the refusal without the password", r.stderr)
	}
}
