package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRedisDatabaseOutOfRange: a Redis URL naming a database the server
// does not have (it has 16 by default) is a configuration error, exit 64
// with the database's number, not "cannot reach store" (74): the
// adversary is an operator who retries a store that answers at once.
func TestRedisDatabaseOutOfRange(t *testing.T) {
	r := testserver.StartRedis(t)
	store := r.URL("", "") + "/99"
	res := run(t, dlockCmd(t, "status", "--store", store))
	wantCode(t, res, exitUsage, "status on database 99 of a server with 16")
	if !strings.Contains(res.stderr, "database 99") || strings.Contains(res.stderr, "cannot reach") {
		t.Errorf("status on database 99: stderr %q, want it to name database 99 and not say the store cannot be reached", res.stderr)
	}
}

// TestPostgresWrongPasswordNoTLS: a wrong password on a PostgreSQL server
// without TLS says the password was refused, exit 77, and mentions no
// TLS: the adversary is pgx's sslmode=prefer, which tries TLS first and
// reports both attempts, the TLS refusal first.
func TestPostgresWrongPasswordNoTLS(t *testing.T) {
	p := testserver.StartPostgresWith(t, testserver.PostgresOptions{})
	if _, err := p.DB(t).ExecContext(t.Context(), "CREATE ROLE app LOGIN PASSWORD 'right-pass'"); err != nil {
		t.Fatal(err)
	}
	store := "postgres://app:wrong-pass@" + p.Addr() + "/postgres?migrate=false"
	res := run(t, dlockCmd(t, "status", "--store", store))
	wantCode(t, res, exitDenied, "status with a wrong password")
	if !strings.Contains(res.stderr, `password authentication failed for user "app"`) || strings.Contains(strings.ToLower(res.stderr), "tls") {
		t.Errorf("status with a wrong password: stderr %q, want the password refused and no TLS error", res.stderr)
	}
}

// TestConnectTimeoutHints: an Open that runs out its connect timeout says
// what it saw. The adversaries are a rediss:// URL for a Redis that
// speaks no TLS (the handshake is never answered) and an etcd URL whose
// port refuses connections (the client retries them quietly).
func TestConnectTimeoutHints(t *testing.T) {
	r := testserver.StartRedis(t)
	for _, tc := range []struct{ store, want string }{
		{strings.Replace(r.URL("", ""), "redis://", "rediss://", 1) + "?tls_insecure_skip_verify=true", "may not speak TLS"},
		{"etcd://" + closedPort(t), "refused"},
	} {
		res := run(t, dlockCmd(t, "status", "--connect-timeout", "2s", "--store", tc.store))
		wantCode(t, res, exitStore, "status on "+tc.store)
		if !strings.Contains(res.stderr, tc.want) {
			t.Errorf("status on %s: stderr %q, want the hint %q", tc.store, res.stderr, tc.want)
		}
	}
}
