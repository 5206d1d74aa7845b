package sqllock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// pgPassword is the password of every password role of
// TestPostgresSecurity; no error may quote it.
const pgPassword = "Pg-Secret-4e9b"

// pgLockGrant is the least privilege of a lock user, as the package
// documentation gives it, for the roles in %s.
const pgLockGrant = `GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_holders TO %s`

// pgServer is a PostgreSQL server that asks TCP clients for passwords
// and speaks TLS, with the default lease table made by the superuser's
// Migrate, as an operator would set it up.
type pgServer struct {
	*testserver.Postgres
	pki   *testserver.PKI
	admin *sql.DB // the superuser, over the Unix socket

	// certFile and keyFile are the client certificate of role
	// dlock_cert, which logs in with it instead of a password.
	certFile, keyFile string
}

// url returns a postgres:// store URL for user (with pgPassword unless
// user is dlock_cert) with query parameters query and migrate=false: a
// lock user has no CREATE on the schema.
func (s *pgServer) url(user, query string) string {
	info := url.UserPassword(user, pgPassword)
	if user == "dlock_cert" {
		info = url.User(user)
	}
	u := url.URL{Scheme: "postgres", User: info, Host: s.Addr(), Path: "/postgres", RawQuery: "migrate=false"}
	if query != "" {
		u.RawQuery += "&" + query
	}
	return u.String()
}

// ca returns the query parameter name=<the PKI's CA file>.
func (s *pgServer) ca(name string) string { return name + "=" + url.QueryEscape(s.pki.CAFile) }

func TestPostgresSecurity(t *testing.T) {
	pki := testserver.NewPKI(t)
	s := &pgServer{pki: pki}
	s.certFile, s.keyFile = pki.Issue(t, "dlock_cert", "dlock_cert")
	s.Postgres = testserver.StartPostgresWith(t, testserver.PostgresOptions{
		CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CAFile: pki.CAFile,
		CertUsers: []string{"dlock_cert"}, SSLUsers: []string{"dlock_tls"},
	})
	s.admin = s.DB(t)
	if err := sqllock.Migrate(t.Context(), s.admin, sqllock.PostgreSQL, ""); err != nil {
		t.Fatalf("Migrate as the superuser = %v", err)
	}
	for _, q := range []string{
		`CREATE ROLE dlock_app LOGIN PASSWORD '` + pgPassword + `'`,
		`CREATE ROLE dlock_neighbour LOGIN PASSWORD '` + pgPassword + `'`,
		`CREATE ROLE dlock_tls LOGIN PASSWORD '` + pgPassword + `'`,
		`CREATE ROLE dlock_nogrant LOGIN PASSWORD '` + pgPassword + `'`,
		`CREATE ROLE dlock_migrator LOGIN PASSWORD '` + pgPassword + `'`,
		`CREATE ROLE dlock_cert LOGIN`,
		strings.ReplaceAll(pgLockGrant, "%s", "dlock_app, dlock_neighbour, dlock_tls, dlock_cert"),
		`GRANT CREATE ON SCHEMA public TO dlock_migrator`,
	} {
		mustExec(t, s.admin, q)
	}
	t.Run("Password", func(t *testing.T) { testPostgresPassword(t, s) })
	t.Run("TLS", func(t *testing.T) { testPostgresTLS(t, s) })
	t.Run("ListenerTLS", func(t *testing.T) { testPostgresListenerTLS(t, s) })
	t.Run("WrongServerName", testPostgresWrongServerName)
	t.Run("NoGrant", func(t *testing.T) { testPostgresNoGrant(t, s) })
	t.Run("EachGrant", func(t *testing.T) { testPostgresEachGrant(t, s) })
	t.Run("Migrate", func(t *testing.T) { testPostgresMigrateGrant(t, s) })
	t.Run("Neighbour", func(t *testing.T) { testPostgresNeighbour(t, s) })
	// The whole suite under the least grant, once with a password over
	// TCP and once over verified TLS (about 20 s each).
	t.Run("ConformanceLeastPrivilege", func(t *testing.T) {
		dlocktest.Run(t, openHarness(s.url("dlock_app", ""), s.admin))
	})
	t.Run("ConformanceTLS", func(t *testing.T) {
		dlocktest.Run(t, openHarness(s.url("dlock_tls", s.ca("tls_ca")), s.admin))
	})
}

// openHarness is the conformance harness of Lockers made by dlock.Open on
// store, the path a user's URL takes; admin (a superuser) expires locks.
func openHarness(store string, admin *sql.DB) dlocktest.Harness {
	h := harness(admin, sqllock.PostgreSQL)
	h.NewLocker = func(t testing.TB) *dlock.Locker {
		t.Helper()
		l, err := dlock.Open(t.Context(), store)
		if err != nil {
			t.Fatalf("Open(%q) = %v, want a Locker", store, err)
		}
		return l
	}
	return withDriver(h, func(t testing.TB) (*dlock.Locker, driver.Driver, error) {
		return testhook.Open(t.Context(), store)
	})
}

// wantOpenError checks that dlock.Open(store) fails with an error wrapping
// want (if set) and containing text, and quoting no password.
func wantOpenError(t *testing.T, store string, want error, text string) {
	t.Helper()
	l, err := dlock.Open(t.Context(), store)
	if err == nil {
		l.Close()
		t.Fatalf("Open(%q) = a Locker, want an error wrapping %v (%q)", store, want, text)
	}
	if want != nil && !errors.Is(err, want) || !strings.Contains(err.Error(), text) {
		t.Errorf("Open(%q) = %q, want an error wrapping %v containing %q", store, err, want, text)
	}
	if strings.Contains(err.Error(), pgPassword) {
		t.Errorf("Open(%q) = %q, which quotes the password", store, err)
	}
}

func testPostgresPassword(t *testing.T, s *pgServer) {
	other := newLocker(t, s.admin, sqllock.PostgreSQL, nil)
	testOpenURL(t, s.url("dlock_app", ""), other)

	wrong := strings.Replace(s.url("dlock_app", ""), pgPassword, "Wrong-Secret-77", 1)
	wantOpenError(t, wrong, dlock.ErrDenied, `password authentication failed for user "dlock_app"`)
	l, err := dlock.Open(t.Context(), wrong)
	if err == nil {
		l.Close()
	} else if strings.Contains(err.Error(), "Wrong-Secret-77") {
		t.Errorf("Open(wrong password) = %q, which quotes the password", err)
	}
	none := "postgres://dlock_app@" + s.Addr() + "/postgres?migrate=false"
	wantOpenError(t, none, dlock.ErrDenied, "dlock_app")
	// The superuser has no password: TCP is closed to it.
	wantOpenError(t, "postgres://postgres@"+s.Addr()+"/postgres", dlock.ErrDenied, "postgres")
}

func testPostgresTLS(t *testing.T, s *pgServer) {
	other := newLocker(t, s.admin, sqllock.PostgreSQL, nil)
	client := "&sslcert=" + url.QueryEscape(s.certFile) + "&sslkey=" + url.QueryEscape(s.keyFile)
	tlsClient := "&tls_cert=" + url.QueryEscape(s.certFile) + "&tls_key=" + url.QueryEscape(s.keyFile)
	// dlock_tls may log in only over TLS (pg_hba hostnossl ... reject),
	// so each success is a TLS connection; dlock_cert only with its
	// certificate.
	for _, c := range []struct {
		name, url string
		want      error  // nil: Open succeeds
		text      string // in the error
	}{
		{"Require", s.url("dlock_tls", "sslmode=require"), nil, ""},
		{"VerifyFull", s.url("dlock_tls", "sslmode=verify-full&"+s.ca("sslrootcert")), nil, ""},
		{"VerifyFullNoCA", s.url("dlock_tls", "sslmode=verify-full"), nil, "certificate signed by unknown authority"},
		{"Disable", s.url("dlock_tls", "sslmode=disable"), dlock.ErrDenied, `rejects connection for host "127.0.0.1", user "dlock_tls"`},
		{"ClientCert", s.url("dlock_cert", "sslmode=verify-full&"+s.ca("sslrootcert")+client), nil, ""},
		{"ClientCertMissing", s.url("dlock_cert", "sslmode=verify-full&"+s.ca("sslrootcert")), dlock.ErrDenied, "certificate"},
		{"TLSCA", s.url("dlock_tls", s.ca("tls_ca")), nil, ""},
		{"TLSServerName", s.url("dlock_tls", s.ca("tls_ca")+"&tls_server_name=localhost"), nil, ""},
		{"TLSWrongServerName", s.url("dlock_tls", s.ca("tls_ca")+"&tls_server_name=db.invalid"), nil, "certificate is valid for localhost, not db.invalid"},
		{"TLSNoCA", s.url("dlock_tls", "tls_server_name=localhost"), nil, "certificate signed by unknown authority"},
		{"TLSInsecureSkipVerify", s.url("dlock_tls", "tls_insecure_skip_verify=true"), nil, ""},
		{"TLSClientCert", s.url("dlock_cert", s.ca("tls_ca")+tlsClient), nil, ""},
		{"TLSWithSSLMode", s.url("dlock_tls", s.ca("tls_ca")+"&sslmode=require"), dlock.ErrBadURL, "either the tls_* parameters or libpq's sslmode"},
		{"TLSOnSocket", s.url("dlock_tls", s.ca("tls_ca")+"&host="+url.QueryEscape(s.SocketDir())), dlock.ErrBadURL, "need a TCP host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == nil && c.text == "" {
				testOpenURL(t, c.url, other)
				return
			}
			wantOpenError(t, c.url, c.want, c.text)
		})
	}
}

// testPostgresListenerTLS checks that a Locker's LISTEN connection, which
// is its own, not the pool's, logs in as the pool does: over TLS, which
// role dlock_tls cannot do without.
func testPostgresListenerTLS(t *testing.T, s *pgServer) {
	store := s.url("dlock_tls", s.ca("tls_ca"))
	holder, waiter := testkit.MustOpen(t, store), testkit.MustOpen(t, store)
	name := testkit.UniqueName(t, "sqllock")
	k := testkit.MustTryAcquire(t, holder, name)
	got := testkit.AcquireAsync(t.Context(), waiter, name)
	testkit.Eventually(t, "LISTEN backend of dlock_tls", func() bool { return listening(t, s.admin, "dlock_tls") > 0 })
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	testkit.WantAcquired(t, got, name, testkit.Patience)
}

// testPostgresWrongServerName checks that sslmode=verify-full refuses a
// server whose certificate, signed by the trusted authority, names
// another host, while verify-ca (the chain only) accepts it.
func testPostgresWrongServerName(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir, "db.invalid")
	p := testserver.StartPostgresWith(t, testserver.PostgresOptions{CertFile: certFile, KeyFile: keyFile})
	mustExec(t, p.DB(t), `CREATE ROLE dlock_app LOGIN PASSWORD '`+pgPassword+`' SUPERUSER`)
	store := func(mode string) string {
		return "postgres://dlock_app:" + pgPassword + "@" + p.Addr() + "/postgres?sslmode=" + mode + "&sslrootcert=" + url.QueryEscape(certFile)
	}
	wantOpenError(t, store("verify-full"), nil, "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs")
	l := testkit.MustOpen(t, store("verify-ca"))
	testkit.MustTryAcquire(t, l, testkit.UniqueName(t, "sqllock"))
}

// selfSigned writes to dir a self-signed certificate for the DNS name
// host only, and its key.
func selfSigned(t *testing.T, dir, host string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// testPostgresNoGrant checks that a user without the grant gets an error
// wrapping dlock.ErrDenied from every step that touches the table, at
// once: not a wait until the context ends, nor a silent "not acquired".
func testPostgresNoGrant(t *testing.T, s *pgServer) {
	l := testkit.MustOpen(t, s.url("dlock_nogrant", "")) // Open only connects
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := testkit.UniqueName(t, "sqllock")
	steps := map[string]func() error{
		"Acquire":       func() error { _, err := l.Acquire(ctx, name); return err },
		"TryAcquire":    func() error { _, err := l.TryAcquire(ctx, name); return err },
		"AcquireShared": func() error { _, err := l.Acquire(ctx, name, dlock.Shared()); return err },
		"Inspect":       func() error { _, err := l.Inspect(ctx, name); return err },
		"ForceRelease":  func() error { _, err := l.ForceRelease(ctx, name); return err },
		// Observe kept asking a store that refused it, and its channel
		// stayed silent: the caller never learned why.
		"Observe": func() error { _, err := l.Observe(ctx, name); return err },
	}
	for what, step := range steps {
		err := step()
		if !errors.Is(err, dlock.ErrDenied) || ctx.Err() != nil || !strings.Contains(err.Error(), "permission denied for table dlock_locks") {
			t.Errorf("%s(%q) as a user without the grant = %v, want an error wrapping ErrDenied, permission denied for table dlock_locks, before the context ends", what, name, err)
		}
	}
}

// testPostgresEachGrant revokes each privilege of the least grant in turn
// and checks that a Locker's steps then fail with dlock.ErrDenied; all
// but DELETE on the lease table, which only the cleanup of idle rows
// uses (its errors are ignored, and without it idle rows accumulate).
func testPostgresEachGrant(t *testing.T, s *pgServer) {
	for _, table := range []string{"dlock_locks", "dlock_locks_holders"} {
		for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE"} {
			role := strings.ToLower("dlock_no_" + priv + "_" + table)
			mustExec(t, s.admin, `CREATE ROLE `+role+` LOGIN PASSWORD '`+pgPassword+`'`)
			mustExec(t, s.admin, strings.ReplaceAll(pgLockGrant, "%s", role))
			mustExec(t, s.admin, `REVOKE `+priv+` ON `+table+` FROM `+role)
			err := lockSteps(t, testkit.MustOpen(t, s.url(role, "")))
			cleanupOnly := table == "dlock_locks" && priv == "DELETE"
			if cleanupOnly && err != nil || !cleanupOnly && !errors.Is(err, dlock.ErrDenied) {
				t.Errorf("lock steps without %s on %s = %v, want %s", priv, table, err, map[bool]string{true: "nil (only cleanup deletes)", false: "an error wrapping ErrDenied"}[cleanupOnly])
			}
		}
	}
}

// lockSteps takes, refreshes, inspects and releases an exclusive and a
// shared lock on l, and returns the first error.
func lockSteps(t *testing.T, l *dlock.Locker) error {
	ctx := t.Context()
	for _, opts := range [][]dlock.Option{nil, {dlock.Shared()}} {
		k, err := l.TryAcquire(ctx, testkit.UniqueName(t, "sqllock"), opts...)
		if err != nil {
			return err
		}
		if err := k.Refresh(ctx); err != nil {
			return err
		}
		if _, err := l.Inspect(ctx, k.Name()); err != nil {
			return err
		}
		if err := k.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// testPostgresMigrateGrant checks what Migrate needs: a lock user cannot
// create the table (ErrDenied, also through a URL without migrate=false),
// and a role with CREATE on the schema can.
func testPostgresMigrateGrant(t *testing.T, s *pgServer) {
	appDB := s.sqlDB(t, "dlock_app")
	if err := sqllock.Migrate(t.Context(), appDB, sqllock.PostgreSQL, "other_locks"); !errors.Is(err, dlock.ErrDenied) {
		t.Errorf("Migrate as a lock user = %v, want an error wrapping ErrDenied", err)
	}
	migrating := strings.Replace(s.url("dlock_app", ""), "migrate=false", "migrate=true", 1)
	l := testkit.MustOpen(t, migrating)
	if _, err := l.TryAcquire(t.Context(), testkit.UniqueName(t, "sqllock")); !errors.Is(err, dlock.ErrDenied) || !strings.Contains(err.Error(), "migrate=false") {
		t.Errorf("TryAcquire through %q = %v, want an error wrapping ErrDenied that points to migrate=false", migrating, err)
	}
	if err := sqllock.Migrate(t.Context(), s.sqlDB(t, "dlock_migrator"), sqllock.PostgreSQL, "other_locks"); err != nil {
		t.Errorf("Migrate as a role with CREATE on the schema = %v, want nil", err)
	}
}

// sqlDB returns a *sql.DB logged in as user with pgPassword, closed when
// the test ends.
func (s *pgServer) sqlDB(t *testing.T, user string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", "postgres://"+user+":"+pgPassword+"@"+s.Addr()+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testPostgresNeighbour checks what a neighbour, a second role with the
// same grant, can do to a lock held by another. Through dlock it cannot
// take it, nor release or refresh it with a stale handle of its own.
// With the raw grant it can delete the row (or update it: the owner
// column is readable by anyone granted SELECT), which frees the name;
// the holder's Done then closes at its next renewal, and the next
// holder's fencing token is larger.
func testPostgresNeighbour(t *testing.T, s *pgServer) {
	ctx := t.Context()
	app, neighbour := testkit.MustOpen(t, s.url("dlock_app", "")), testkit.MustOpen(t, s.url("dlock_neighbour", ""))

	// A stale handle: the neighbour's lease ended (an administrator freed
	// it), and the app took the name.
	name := testkit.UniqueName(t, "sqllock")
	stale := testkit.MustTryAcquire(t, neighbour, name, dlock.WithoutRenewal())
	if held, err := newLocker(t, s.admin, sqllock.PostgreSQL, nil).ForceRelease(ctx, name); !held || err != nil {
		t.Fatalf("ForceRelease(%q) = %v, %v; want true, nil", name, held, err)
	}
	k := testkit.MustTryAcquire(t, app, name, dlock.WithTTL(3*time.Second))
	testkit.WantNotAcquired(t, neighbour, name, "while another owner holds it")
	if err := stale.Refresh(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("stale Refresh(%q) by the neighbour = %v, want ErrNotHeld", name, err)
	}
	if err := stale.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("stale Release(%q) by the neighbour = %v, want ErrNotHeld", name, err)
	}
	if h := holder(t, s.admin, sqllock.PostgreSQL, "", name); h == nil || h.Owner != k.Owner() || h.Fence != k.Fence() {
		t.Fatalf("holder of %q after the neighbour's steps = %+v, want owner %q, fence %d", name, h, k.Owner(), k.Fence())
	}
	if err := k.Refresh(ctx); err != nil {
		t.Fatalf("Refresh(%q) by the holder = %v, want nil", name, err)
	}

	// The raw store: DELETE frees the name; the holder finds out at its
	// next renewal (every TTL/3).
	res, err := s.sqlDB(t, "dlock_neighbour").ExecContext(ctx, `DELETE FROM dlock_locks WHERE name = $1`, name)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("DELETE the row of %q as the neighbour = %d rows, %v; want 1, nil", name, n, err)
	}
	select {
	case <-k.Done():
	case <-time.After(time.Minute):
		t.Fatalf("Done of %q not closed a minute after the neighbour deleted its row", name)
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Errorf("Cause of %q after the DELETE = %v, want ErrLost", name, cause)
	}
	next := testkit.MustTryAcquire(t, neighbour, name)
	if next.Fence() <= k.Fence() {
		t.Errorf("Fence of %q after the DELETE = %d, want more than the lost holder's %d", name, next.Fence(), k.Fence())
	}
}
