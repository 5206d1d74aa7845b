package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRunMySQLTLSPassword runs a command under a lock on MariaDB as a
// user that must connect with TLS, with the password from
// $DLOCK_PASSWORD, and checks that refusals exit 77 (dlock.ErrDenied)
// and print no password.
func TestRunMySQLTLSPassword(t *testing.T) {
	pki := testserver.NewPKI(t)
	m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{TLS: pki})
	m.Exec(t, "CREATE USER 'cli'@'%' IDENTIFIED BY 'cli-Secret-pw' REQUIRE SSL",
		"GRANT ALL ON dlock.* TO 'cli'@'%'")
	store := "mysql://cli@" + m.Addr() + "/dlock?tls_ca=" + url.QueryEscape(pki.CAFile)
	for _, tc := range []struct {
		what, store, pass string
		ok                bool
	}{
		{"TLS and $DLOCK_PASSWORD", store, "cli-Secret-pw", true},
		{"a wrong $DLOCK_PASSWORD", store, "Wrong-Secret-pw", false},
		{"no TLS", "mysql://cli@" + m.Addr() + "/dlock", "cli-Secret-pw", false},
	} {
		c := dlockCmd(t, "run", "--store", tc.store, "job", "--", "true")
		c.Env = append(c.Env, "DLOCK_PASSWORD="+tc.pass)
		r := run(t, c)
		if tc.ok {
			wantCode(t, r, 0, "run with "+tc.what)
			continue
		}
		wantCode(t, r, exitDenied, "run with "+tc.what)
		if !strings.Contains(r.stderr, "denied access") || strings.Contains(r.stdout+r.stderr, tc.pass) {
			t.Errorf("run with %s printed %q, want the refusal without the password", tc.what, r.stderr)
		}
	}
}
