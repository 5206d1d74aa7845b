package testserver_test

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestPostgresWith checks that a server started by StartPostgresWith asks
// TCP clients for a scram-sha-256 password, speaks TLS with the given
// certificate, accepts a client certificate for a CertUser, and refuses
// an SSLUser without TLS, while DSN (the Unix socket) still works.
func TestPostgresWith(t *testing.T) {
	pki := testserver.NewPKI(t)
	p := testserver.StartPostgresWith(t, testserver.PostgresOptions{
		CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CAFile: pki.CAFile,
		CertUsers: []string{"dlock"}, SSLUsers: []string{"tls_only"},
	})
	admin := p.DB(t)
	for _, s := range []string{
		`CREATE ROLE pw LOGIN PASSWORD 'secret-pw'`,
		`CREATE ROLE tls_only LOGIN PASSWORD 'secret-tls'`,
		`CREATE ROLE dlock LOGIN`,
	} {
		if _, err := admin.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var stored string
	if err := admin.QueryRowContext(t.Context(), `SELECT rolpassword FROM pg_authid WHERE rolname = 'pw'`).Scan(&stored); err != nil || !strings.HasPrefix(stored, "SCRAM-SHA-256$") {
		t.Errorf("pg_authid.rolpassword of pw = %.14q, %v; want a SCRAM-SHA-256 verifier", stored, err)
	}
	tcp := func(userinfo, query string) string {
		return "postgres://" + userinfo + "@" + p.Addr() + "/postgres?" + query
	}
	ca := "sslrootcert=" + url.QueryEscape(pki.CAFile)
	client := "&sslcert=" + url.QueryEscape(pki.ClientCert) + "&sslkey=" + url.QueryEscape(pki.ClientKey)
	for _, c := range []struct {
		dsn     string
		ok, ssl bool
	}{
		{tcp("pw:secret-pw", "sslmode=disable"), true, false},
		{tcp("pw:secret-pw", "sslmode=verify-full&"+ca), true, true},
		{tcp("pw:wrong", "sslmode=disable"), false, false},
		{tcp("pw", "sslmode=disable"), false, false},
		{tcp("postgres", "sslmode=disable"), false, false},
		{tcp("tls_only:secret-tls", "sslmode=disable"), false, false},
		{tcp("tls_only:secret-tls", "sslmode=require"), true, true},
		{tcp("dlock", "sslmode=verify-full&"+ca+client), true, true},
		{tcp("dlock", "sslmode=verify-full&"+ca), false, false},
	} {
		ssl, err := sslOf(t.Context(), c.dsn)
		if (err == nil) != c.ok || ssl != c.ssl {
			t.Errorf("connect(%s) = ssl %v, %v; want ssl %v, success %v", c.dsn, ssl, err, c.ssl, c.ok)
		}
	}
}

// sslOf connects to dsn and reports whether the connection uses TLS, as
// the server sees it.
func sslOf(ctx context.Context, dsn string) (bool, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var ssl bool
	err = db.QueryRowContext(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
	return ssl, err
}
