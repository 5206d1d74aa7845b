package testserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestMariaDBTLS checks that a server started with a PKI speaks TLS with
// its certificate, and refuses a REQUIRE SSL user without it.
func TestMariaDBTLS(t *testing.T) {
	pki := testserver.NewPKI(t)
	m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{TLS: pki})
	m.Exec(t, "CREATE USER 'tlsuser'@'%' IDENTIFIED BY 'pw' REQUIRE SSL")

	pem, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	open := func(tc *tls.Config) *sql.DB {
		c := mysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr, c.TLS = "tlsuser", "pw", "tcp", m.Addr(), tc
		conn, err := mysql.NewConnector(c)
		if err != nil {
			t.Fatalf("NewConnector: %v", err)
		}
		db := sql.OpenDB(conn)
		t.Cleanup(func() { db.Close() })
		return db
	}

	var name, cipher string
	err = open(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}).QueryRowContext(t.Context(), "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher)
	if err != nil || cipher == "" {
		t.Fatalf("Ssl_cipher over TLS = %q, %v; want a cipher", cipher, err)
	}

	var one int
	err = open(nil).QueryRowContext(t.Context(), "SELECT 1").Scan(&one)
	if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("SELECT 1 without TLS = %v, want error 1045", err)
	}
}
