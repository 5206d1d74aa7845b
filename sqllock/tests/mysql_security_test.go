package sqllock_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// mysqlLockGrants are the least privileges of a lock user on the default
// tables of the database "dlock", as the package documentation gives them
// (user stands for the account).
var mysqlLockGrants = []string{
	"GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_locks TO user",
	"GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.dlock_locks_holders TO user",
}

// mysqlUser creates the account name@'%' with password pass (and the
// REQUIRE clause require, if not empty) on m, granted grants.
func mysqlUser(t *testing.T, m *testserver.MariaDB, name, pass, require string, grants ...string) {
	t.Helper()
	create := "CREATE USER '" + name + "'@'%' IDENTIFIED BY '" + pass + "'"
	if require != "" {
		create += " REQUIRE " + require
	}
	stmts := []string{create}
	for _, g := range grants {
		stmts = append(stmts, strings.Replace(g, " TO user", " TO '"+name+"'@'%'", 1))
	}
	m.Exec(t, stmts...)
}

// mysqlUserURL is the store URL of the database "dlock" on m as user with
// password pass, and the query parameters query ("" for none).
func mysqlUserURL(m *testserver.MariaDB, user, pass, query string) string {
	u := url.URL{Scheme: "mysql", User: url.UserPassword(user, pass), Host: m.Addr(), Path: "/dlock", RawQuery: query}
	return u.String()
}

// mysqlUserDB opens the database "dlock" on m as user with password pass,
// without TLS, closed when the test ends.
func mysqlUserDB(t testing.TB, m *testserver.MariaDB, user, pass string) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, pass, "tcp", m.Addr(), "dlock"
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatalf("open as %s: %v", user, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mysqlURLHarness returns a conformance Harness whose Lockers connect as
// the mysql:// URL store does through dlock.Open (credentials, TLS), and
// share one pool, warmed so that the Close property counts no
// connection's goroutine as the Locker's. They create no table.
func mysqlURLHarness(t *testing.T, store string) dlocktest.Harness {
	t.Helper()
	connector, err := testhook.MySQLConnector(store)
	if err != nil {
		t.Fatalf("MySQLConnector(%q) = %v", store, err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { db.Close() })
	warmPool(t, db, 16)
	h := harness(db, sqllock.MySQL)
	h.NewLocker = func(t testing.TB) *dlock.Locker {
		t.Helper()
		l, err := sqllock.New(db, sqllock.MySQL, &sqllock.Options{NoMigrate: true})
		if err != nil {
			t.Fatalf("New = %v, want a Locker", err)
		}
		return l
	}
	h.Expire = func(t testing.TB, name string) {
		t.Helper()
		admin := h.NewLocker(t)
		defer admin.Close()
		if held, err := admin.ForceRelease(t.Context(), name); !held || err != nil {
			t.Fatalf("ForceRelease(%q) = %v, %v, want true, nil", name, held, err)
		}
	}
	return withDriver(h, func(t testing.TB) (*dlock.Locker, driver.Driver, error) {
		return testhook.New(db, sqllock.MySQL.String(), true)
	})
}

// wantDenied checks that err wraps dlock.ErrDenied and carries neither
// the password nor the context's end, so it came from the server at once.
func wantDenied(t *testing.T, call string, err error, password string) {
	t.Helper()
	switch {
	case !errors.Is(err, dlock.ErrDenied):
		t.Errorf("%s = %v, want ErrDenied", call, err)
	case errors.Is(err, context.DeadlineExceeded):
		t.Errorf("%s = %v, want ErrDenied before the deadline", call, err)
	case password != "" && strings.Contains(err.Error(), password):
		t.Errorf("%s = %q, want an error without the password", call, err)
	}
}

// TestMariaDBSecurity runs sqllock's MySQL dialect as the accounts an
// operator would make: a password user with the least privileges
// (conformance suite through dlock.Open, tables made by a separate
// Migrate user granted CREATE and SELECT., users without them, and users that
// must connect with TLS or a client certificate.
func TestMariaDBSecurity(t *testing.T) {
	pki := testserver.NewPKI(t)
	m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{TLS: pki})

	// The tables must exist before a table-level GRANT names them.
	// SELECT lets information_schema show Migrate the columns it checks.
	mysqlUser(t, m, "migrator", "migrate-pw", "", "GRANT CREATE, SELECT ON dlock.* TO user")
	t.Run("MigrateGrantedCreate", func(t *testing.T) {
		db := mysqlUserDB(t, m, "migrator", "migrate-pw")
		for range 2 { // idempotent: the second finds the tables and columns
			if err := sqllock.Migrate(t.Context(), db, sqllock.MySQL, ""); err != nil {
				t.Fatalf("Migrate as a user granted CREATE, SELECT = %v, want nil", err)
			}
		}
	})
	if t.Failed() {
		return
	}
	t.Run("MigrateGrantedCreateOnly", func(t *testing.T) {
		// Without SELECT, information_schema hides the columns, and
		// Migrate's attempt to add them is refused.
		mysqlUser(t, m, "creator", "create-pw", "", "GRANT CREATE ON dlock.* TO user")
		err := sqllock.Migrate(t.Context(), mysqlUserDB(t, m, "creator", "create-pw"), sqllock.MySQL, "")
		wantDenied(t, "Migrate as a user granted CREATE only", err, "create-pw")
	})
	mysqlUser(t, m, "locker", "lock-pw", "", mysqlLockGrants...)
	lockURL := mysqlUserURL(m, "locker", "lock-pw", "migrate=false")

	t.Run("WrongPassword", func(t *testing.T) {
		store := mysqlUserURL(m, "locker", "Wr0ng-pa55word", "migrate=false")
		l, err := dlock.Open(t.Context(), store)
		if l != nil {
			l.Close()
		}
		wantDenied(t, "Open(wrong password)", err, "Wr0ng-pa55word")
	})

	t.Run("LeastPrivilege", func(t *testing.T) { dlocktest.Run(t, mysqlURLHarness(t, lockURL)) })

	t.Run("MigratingWithoutCreate", func(t *testing.T) {
		// The default migrate=true needs CREATE: the error says so.
		l := testkit.MustOpen(t, mysqlUserURL(m, "locker", "lock-pw", ""))
		_, err := l.TryAcquire(t.Context(), "needs-create")
		wantDenied(t, `TryAcquire("needs-create")`, err, "lock-pw")
		if err != nil && !strings.Contains(err.Error(), "migrate=false") {
			t.Errorf(`TryAcquire("needs-create") = %v, want the advice to open with migrate=false`, err)
		}
	})

	t.Run("ReadOnlyUser", func(t *testing.T) {
		// SELECT alone is enough for dlock status, not for locking.
		mysqlUser(t, m, "reader", "read-pw", "",
			"GRANT SELECT ON dlock.dlock_locks TO user", "GRANT SELECT ON dlock.dlock_locks_holders TO user")
		holder := testkit.MustOpen(t, lockURL)
		testkit.MustTryAcquire(t, holder, "watched")
		l := testkit.MustOpen(t, mysqlUserURL(m, "reader", "read-pw", "migrate=false"))
		if hs, err := l.Inspect(t.Context(), "watched"); err != nil || len(hs) != 1 {
			t.Errorf(`Inspect("watched") as a reader = %v, %v, want its holder`, hs, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := l.Acquire(ctx, "not-granted") // waiting: must not retry a refusal
		wantDenied(t, `Acquire("not-granted")`, err, "read-pw")
		if err != nil && !strings.Contains(err.Error(), "1142") {
			t.Errorf(`Acquire("not-granted") = %v, want MySQL's error 1142`, err)
		}
		_, err = l.ForceRelease(t.Context(), "watched")
		wantDenied(t, `ForceRelease("watched")`, err, "read-pw")
	})

	t.Run("NoPrivileges", func(t *testing.T) {
		mysqlUser(t, m, "nobody", "nobody-pw", "")
		l, err := dlock.Open(t.Context(), mysqlUserURL(m, "nobody", "nobody-pw", "migrate=false"))
		if l != nil {
			l.Close()
		}
		wantDenied(t, "Open(a user without privileges on the database)", err, "nobody-pw")
	})

	mysqlUser(t, m, "tlsuser", "tls-pw", "SSL", mysqlLockGrants...)
	mysqlUser(t, m, "certuser", "cert-pw", "X509", mysqlLockGrants...)
	t.Run("TLS", func(t *testing.T) {
		ca := "tls_ca=" + url.QueryEscape(pki.CAFile)
		cert := "tls_cert=" + url.QueryEscape(pki.ClientCert) + "&tls_key=" + url.QueryEscape(pki.ClientKey)
		other := testkit.MustOpen(t, lockURL)
		for _, tc := range []struct{ name, user, pass, query string }{
			{"VerifiedCA", "tlsuser", "tls-pw", ca},
			{"TLSTrueWithCA", "tlsuser", "tls-pw", "tls=true&" + ca},
			{"ServerName", "tlsuser", "tls-pw", ca + "&tls_server_name=localhost"},
			{"SkipVerifyByName", "tlsuser", "tls-pw", "tls_insecure_skip_verify=true"},
			{"ClientCertificate", "certuser", "cert-pw", ca + "&" + cert},
		} {
			t.Run(tc.name, func(t *testing.T) {
				testOpenURL(t, mysqlUserURL(m, tc.user, tc.pass, "migrate=false&"+tc.query), other)
			})
		}
		for _, tc := range []struct{ name, user, pass, query, want string }{
			// tls=true uses the system's roots, which do not hold the
			// throwaway authority: TLS is spoken and verified.
			{"SystemRoots", "tlsuser", "tls-pw", "tls=true", "certificate signed by unknown authority"},
			{"WrongServerName", "tlsuser", "tls-pw", ca + "&tls_server_name=db.example", "db.example"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				l, err := dlock.Open(t.Context(), mysqlUserURL(m, tc.user, tc.pass, "migrate=false&"+tc.query))
				if l != nil {
					l.Close()
				}
				if err == nil || errors.Is(err, dlock.ErrDenied) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Open(%s) = %v, want a certificate error with %q", tc.query, err, tc.want)
				}
			})
		}
		for _, tc := range []struct{ name, user, pass, query string }{
			{"RequireSSLWithoutTLS", "tlsuser", "tls-pw", ""},
			{"RequireX509WithoutCertificate", "certuser", "cert-pw", ca},
		} {
			t.Run(tc.name, func(t *testing.T) {
				l, err := dlock.Open(t.Context(), mysqlUserURL(m, tc.user, tc.pass, "migrate=false&"+tc.query))
				if l != nil {
					l.Close()
				}
				wantDenied(t, "Open("+tc.name+")", err, tc.pass)
			})
		}
	})

	t.Run("TLSConformance", func(t *testing.T) {
		// The client-certificate path, the one that takes the most
		// configuration, through the whole suite.
		store := mysqlUserURL(m, "certuser", "cert-pw", "migrate=false&tls_ca="+url.QueryEscape(pki.CAFile)+
			"&tls_cert="+url.QueryEscape(pki.ClientCert)+"&tls_key="+url.QueryEscape(pki.ClientKey))
		dlocktest.Run(t, mysqlURLHarness(t, store))
	})
}

// TestMariaDBNeighbour checks what another account with the same grants
// (or a client with the lock user's own credentials) can do to a lock it
// does not own: nothing through dlock, and through raw SQL what its grants
// allow, which the holder notices at its next renewal. The named locks of
// the wake-ups, which any session may take, cost waiters latency, never
// safety.
func TestMariaDBNeighbour(t *testing.T) {
	m := testserver.StartMariaDB(t)
	if err := sqllock.Migrate(t.Context(), m.DB(t), sqllock.MySQL, ""); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	mysqlUser(t, m, "locker", "lock-pw", "", mysqlLockGrants...)
	mysqlUser(t, m, "neighbour", "neighbour-pw", "", mysqlLockGrants...)
	lockURL := mysqlUserURL(m, "locker", "lock-pw", "migrate=false")
	neighbourURL := mysqlUserURL(m, "neighbour", "neighbour-pw", "migrate=false")
	raw := mysqlUserDB(t, m, "neighbour", "neighbour-pw")
	const ttl = 2 * time.Second

	t.Run("ThroughDlock", func(t *testing.T) {
		holder, n := testkit.MustOpen(t, lockURL), testkit.MustOpen(t, neighbourURL)
		k := testkit.MustTryAcquire(t, holder, "mine", dlock.WithTTL(ttl))
		testkit.WantNotAcquired(t, n, "mine", "while another owner holds it")
		// A stale handle: the neighbour held the name, lost it (forced
		// out), and the holder took it since.
		stale := testkit.MustTryAcquire(t, n, "taken-over", dlock.WithTTL(ttl))
		if held, err := holder.ForceRelease(t.Context(), "taken-over"); !held || err != nil {
			t.Fatalf(`ForceRelease("taken-over") = %v, %v, want true, nil`, held, err)
		}
		k2 := testkit.MustTryAcquire(t, holder, "taken-over", dlock.WithTTL(ttl))
		if err := stale.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("stale Refresh = %v, want ErrNotHeld", err)
		}
		if err := stale.Release(t.Context()); err == nil {
			t.Errorf("stale Release = nil, want an error")
		}
		for _, k := range []*dlock.Lock{k, k2} {
			if err := k.Refresh(t.Context()); err != nil {
				t.Errorf("Refresh(%q) by its holder after the neighbour's attempts = %v, want nil", k.Name(), err)
			}
			testkit.WantNotAcquired(t, n, k.Name(), "while another owner holds it")
			wantHolder(t, n, k)
		}
		// A forged owner: the statements dlock runs for a release and a
		// refresh, with the wrong owner, change nothing.
		for _, q := range []string{
			"UPDATE dlock_locks SET owner = '', expires = UTC_TIMESTAMP(6) WHERE name = ? AND owner = ? AND expires > UTC_TIMESTAMP(6)",
			"UPDATE dlock_locks SET expires = TIMESTAMPADD(SECOND, 60, UTC_TIMESTAMP(6)) WHERE name = ? AND owner = ? AND expires > UTC_TIMESTAMP(6)",
		} {
			res, err := raw.ExecContext(t.Context(), q, "mine", "forged-owner")
			if n, _ := res.RowsAffected(); err != nil || n != 0 {
				t.Errorf("%s with a forged owner = %d rows, %v; want 0 rows", q, n, err)
			}
		}
		wantHolder(t, n, k)
	})

	t.Run("RawWrites", func(t *testing.T) {
		// The grants let the neighbour delete or overwrite the row: the
		// holder's Done closes at its next renewal.
		holder := testkit.MustOpen(t, lockURL)
		for _, tc := range []struct{ name, stmt string }{
			{"delete", "DELETE FROM dlock_locks WHERE name = ?"},
			{"steal", "UPDATE dlock_locks SET owner = 'thief', expires = TIMESTAMPADD(SECOND, 60, UTC_TIMESTAMP(6)) WHERE name = ?"},
		} {
			k := testkit.MustTryAcquire(t, holder, tc.name, dlock.WithTTL(ttl))
			if _, err := raw.ExecContext(t.Context(), tc.stmt, tc.name); err != nil {
				t.Fatalf("%s: %v", tc.stmt, err)
			}
			select {
			case <-k.Done():
			case <-time.After(time.Minute):
				t.Fatalf("%s: Done of the holder's lock still open a minute later, want closed at its next renewal", tc.stmt)
			}
			if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
				t.Errorf("%s: context.Cause = %v, want ErrLost", tc.stmt, cause)
			}
		}
		// A deleted row's next holder still gets a greater fence (from
		// the server's clock); a stolen one is the thief's, fence and all.
		k := testkit.MustTryAcquire(t, holder, "delete-fence", dlock.WithTTL(ttl))
		if _, err := raw.ExecContext(t.Context(), "DELETE FROM dlock_locks WHERE name = ?", "delete-fence"); err != nil {
			t.Fatal(err)
		}
		k2 := testkit.MustTryAcquire(t, testkit.MustOpen(t, lockURL), "delete-fence", dlock.WithTTL(ttl))
		if k2.Fence() <= k.Fence() {
			t.Errorf("Fence after a raw DELETE = %d, want above the lost holder's %d", k2.Fence(), k.Fence())
		}
	})

	t.Run("NamedLocks", func(t *testing.T) {
		testNeighbourNamedLocks(t, m, lockURL, raw)
	})
}

// wantHolder checks, through l, that k's Locker holds k's name with k's
// fence.
func wantHolder(t *testing.T, l *dlock.Locker, k *dlock.Lock) {
	t.Helper()
	hs, err := l.Inspect(t.Context(), k.Name())
	if err != nil || len(hs) != 1 || hs[0].Owner != k.Owner() || hs[0].Fence != k.Fence() {
		t.Errorf("Inspect(%q) = %+v, %v; want its holder %q with fence %d", k.Name(), hs, err, k.Owner(), k.Fence())
	}
}

// mysqlNamedLock is the GET_LOCK key a Locker on the default table of the
// database "dlock" takes while it holds name, as anyone who reads dlock's
// source can compute it.
func mysqlNamedLock(name string) string {
	sum := sha256.Sum256([]byte("dlock\x00dlock_locks\x00" + name))
	return "dlock:" + hex.EncodeToString(sum[:24])
}

// testNeighbourNamedLocks checks what a neighbour can do to the named
// locks of the wake-ups: take one first (the holder never gets it, waiters
// poll), not release the holder's, and, only with the lock user's own
// credentials, kill the holder's connection (a spurious wake-up). Each
// costs latency, which it logs, and leaves the lock with its holder.
func testNeighbourNamedLocks(t *testing.T, m *testserver.MariaDB, lockURL string, raw *sql.DB) {
	ctx := t.Context()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	holder, waiter := testkit.MustOpen(t, lockURL), testkit.MustOpen(t, lockURL)
	starts := testkit.WatchStarts(waiter)

	// handoff has waiter wait for name while holder holds it, and
	// returns how long after the release the waiter got it.
	handoff := func(name string) time.Duration {
		t.Helper()
		k := testkit.MustTryAcquire(t, holder, name)
		var releasing atomic.Bool
		got := make(chan *dlock.Lock, 1)
		go func() {
			w, err := waiter.Acquire(ctx, name)
			if err != nil || !releasing.Load() {
				t.Errorf("Acquire(%q) = %v, %v before the holder's release, want a lock after it", name, w, err)
			}
			got <- w
		}()
		starts.WaitInAcquire(t, name, 1) // only the logged latency depends on how far it got
		releasing.Store(true)
		at := time.Now()
		if err := k.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		w := <-got
		took := time.Since(at)
		if w == nil {
			t.FailNow()
		}
		if w.Fence() <= k.Fence() {
			t.Errorf("Fence of the waiter = %d, want above the holder's %d", w.Fence(), k.Fence())
		}
		w.Release(ctx)
		return took
	}
	var base time.Duration
	for i := range 5 {
		base = max(base, handoff("plain-"+strconv.Itoa(i)))
	}

	// The neighbour takes the named lock first: the holder cannot take
	// it, and the waiter's wake-up never comes; it polls.
	var taken time.Duration
	for i := range 5 {
		name := "squatted-" + strconv.Itoa(i)
		var got int
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", mysqlNamedLock(name)).Scan(&got); err != nil || got != 1 {
			t.Fatalf("GET_LOCK by the neighbour = %d, %v; want 1", got, err)
		}
		taken = max(taken, handoff(name))
	}
	t.Logf("handoff, slowest of 5: %v with free named locks, %v with the neighbour holding them (MaxRetryInterval %v)", base, taken, sqllock.DefaultPollInterval)

	// The neighbour cannot release the holder's named lock, nor kill its
	// connection; the lock user's own credentials can kill it.
	k := testkit.MustTryAcquire(t, holder, "named")
	key := mysqlNamedLock("named")
	var owner sql.NullInt64
	deadline := time.Now().Add(time.Minute)
	for !owner.Valid { // the holder takes it a few milliseconds after the row
		if time.Now().After(deadline) {
			t.Fatalf("IS_USED_LOCK(%q) = NULL a minute after Acquire, want the holder's connection: not the key dlock takes", key)
		}
		if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", key).Scan(&owner); err != nil {
			t.Fatal(err)
		}
	}
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", key).Scan(&released); err != nil || released.Int64 != 0 {
		t.Errorf("RELEASE_LOCK of the holder's named lock by the neighbour = %v, %v; want 0", released, err)
	}
	var me *mysql.MySQLError
	if _, err := conn.ExecContext(ctx, "KILL ?", owner.Int64); !errors.As(err, &me) || me.Number != 1095 {
		t.Errorf("KILL of the holder's connection by the neighbour = %v, want error 1095 (not owner)", err)
	}
	same := mysqlUserDB(t, m, "locker", "lock-pw")
	if _, err := same.ExecContext(ctx, "KILL ?", owner.Int64); err != nil {
		t.Errorf("KILL of the holder's connection with its own credentials = %v, want nil", err)
	}
	if err := k.Refresh(ctx); err != nil {
		t.Errorf("Refresh after the named lock's connection was killed = %v, want nil: the row is the lock", err)
	}
	testkit.WantNotAcquired(t, waiter, "named", "while another owner holds it")
	if err := k.Release(ctx); err != nil {
		t.Errorf("Release after the named lock's connection was killed = %v, want nil", err)
	}
}

func TestOpenMySQLTLSErrors(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"tls=maybe", `tls "maybe" is neither true nor false`},
		{"tls=preferred", `tls "preferred" is neither true nor false`},
		{"tls=false&tls_ca=/ca.pem", `tls=false with a TLS scheme or tls_ parameters`},
		{"tls_cert=/c.pem", `tls_cert and tls_key go together`},
		{"tls_ca=/does/not/exist.pem", `tls_ca`},
		{"tls_insecure_skip_verify=yes", `tls_insecure_skip_verify "yes"`},
	} {
		store := "mysql://u:secret-pw@127.0.0.1:1/db?" + tc.query
		_, err := dlock.Open(t.Context(), store)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q and without the password", store, err, tc.want)
		}
	}
}
