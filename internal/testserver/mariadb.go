package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is a mariadbd process started by StartMariaDB. Its methods are
// meant to be called from the test goroutine, but they are safe for
// concurrent use.
type MariaDB struct {
	bin  string // path of mariadbd
	dir  string // holds data/, the socket and server.log; kept across restarts
	port int    // kept across restarts
	opts MariaDBOptions

	server
}

// mariaDBName is the database StartMariaDB creates and DSN names.
const mariaDBName = "dlock"

// MariaDBOptions configures the server StartMariaDBWith starts.
type MariaDBOptions struct {
	// TLS, if not nil, has the server speak TLS with TLS's server
	// certificate and trust TLS's authority for client certificates
	// (--ssl-cert, --ssl-key, --ssl-ca). Clients may still connect
	// without TLS unless their user is created with REQUIRE SSL or
	// REQUIRE X509. Default: no TLS.
	TLS *PKI

	// Clock, if not nil, is the server's wall clock (UTC_TIMESTAMP(),
	// NOW()), which the test steps (see Clock). Default: the host's.
	Clock *Clock
}

// StartMariaDB initialises a MariaDB data directory in a new temporary
// directory, starts mariadbd on a free loopback port with user root and an
// empty password, creates the database "dlock", and returns once the
// server answers. The server is killed and its directory removed when the
// test ends. If mariadbd is not installed, StartMariaDB skips the test
// (see Need).
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	return StartMariaDBWith(t, nil)
}

// StartMariaDBWith is StartMariaDB with the server configured by opts; nil
// means defaults. Root keeps its empty password and needs no TLS, so DSN
// and DB work as with StartMariaDB: tests create their own users with
// them.
func StartMariaDBWith(t testing.TB, opts *MariaDBOptions) *MariaDB {
	t.Helper()
	bin := Need(t, "mariadbd", "mariadb-server")
	install := Need(t, "mariadb-install-db", "mariadb-server")
	// Not t.TempDir: the socket path must stay short.
	dir, err := os.MkdirTemp("", "dlock-mariadb-")
	if err != nil {
		t.Fatalf("create mariadb directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // runs after the kill below
	// A private tmpdir: every mariadbd that starts deletes the #sql* files
	// in its tmpdir (leftover temporary tables), and in a shared /tmp that
	// included the tables of a bootstrap running beside it ("Unknown table
	// 'mysql.tmp_proxies_priv'", seen in CI with modules tested in
	// parallel).
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatalf("create mariadb tmpdir: %v", err)
	}
	out, err := exec.Command(install, "--no-defaults", "--user=root",
		"--datadir="+filepath.Join(dir, "data"),
		"--tmpdir="+filepath.Join(dir, "tmp"),
		"--auth-root-authentication-method=normal").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &MariaDB{bin: bin, dir: dir}
	if opts != nil {
		m.opts = *opts
	}
	m.server = server{name: "mariadbd", where: func() string { return redisAddr(m.port) }, start: m.startLocked}
	m.startAndStop(t)
	db, err := sql.Open("mysql", m.dsn(""))
	if err != nil {
		t.Fatalf("open mariadb: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE IF NOT EXISTS "+mariaDBName); err != nil {
		t.Fatalf("create database %s: %v", mariaDBName, err)
	}
	// mariadb-install-db makes anonymous users at localhost, which
	// 127.0.0.1 resolves to: they would shadow the users tests create
	// at '%'.
	if _, err := db.ExecContext(context.Background(), "DROP USER IF EXISTS ''@'localhost', ''@'"+hostname()+"'"); err != nil {
		t.Fatalf("drop anonymous users: %v", err)
	}
	return m
}

// startLocked starts mariadbd on m.dir's data, on m.port if it is set.
// m.mu must be held.
func (m *MariaDB) startLocked(t testing.TB) {
	t.Helper()
	data := filepath.Join(m.dir, "data")
	args := func(port int) []string {
		a := []string{
			"--no-defaults", "--user=root",
			"--datadir=" + data,
			"--tmpdir=" + filepath.Join(m.dir, "tmp"),
			"--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(m.dir, "sock"),
			"--pid-file=" + filepath.Join(m.dir, "mariadbd.pid"),
			"--innodb-flush-log-at-trx-commit=2",
			"--innodb-buffer-pool-size=64M",
			"--skip-name-resolve=0",
		}
		if p := m.opts.TLS; p != nil {
			a = append(a, "--ssl-cert="+p.ServerCert, "--ssl-key="+p.ServerKey, "--ssl-ca="+p.CAFile)
		}
		return a
	}
	probe := func(port, pid int) error { return probeMariaDB(port, data) }
	m.proc, m.port = launchEnv(t, m.bin, m.dir, m.port, false, args, probe, m.opts.Clock.env())
}

// probeMariaDB connects to 127.0.0.1:port and checks that the server is
// the one serving data, not another that happens to use the port.
func probeMariaDB(port int, data string) error {
	db, err := sql.Open("mysql", mariaDSN(port, "")+"?timeout=1s&readTimeout=1s")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got string
	if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&got); err != nil {
		return err
	}
	if filepath.Clean(got) != filepath.Clean(data) {
		return fmt.Errorf("127.0.0.1:%d serves %s, not %s", port, got, data)
	}
	return nil
}

func mariaDSN(port int, db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = redisAddr(port)
	c.DBName = db
	return strings.TrimSuffix(c.FormatDSN(), "?")
}

// DSN returns a github.com/go-sql-driver/mysql data source name for the
// database "dlock" as root. It stays the same across Restart.
func (m *MariaDB) DSN() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dsn(mariaDBName)
}

func (m *MariaDB) dsn(db string) string { return mariaDSN(m.port, db) }

// Addr returns the server's host:port on the loopback interface. It stays
// the same across Restart.
func (m *MariaDB) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return redisAddr(m.port)
}

// Exec runs each statement on the database "dlock" as root, failing the
// test on the first error: for creating users and granting them
// privileges.
func (m *MariaDB) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	db := m.DB(t)
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// DB returns a new *sql.DB for DSN, closed when the test ends.
func (m *MariaDB) DB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		t.Fatalf("open %s: %v", m.DSN(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// hostname is the machine's name, at which mariadb-install-db also makes
// an anonymous user.
func hostname() string {
	h, _ := os.Hostname()
	return h
}
