package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"
)

// Postgres is a PostgreSQL server started by StartPostgres. Its methods
// are meant to be called from the test goroutine, but they are safe for
// concurrent use.
type Postgres struct {
	bin    string           // path of postgres
	prefix []string         // runs a command as user postgres when the test runs as root
	dir    string           // holds data/, the socket and server.log; kept across restarts
	port   int              // kept across restarts
	opts   *PostgresOptions // nil for StartPostgres: trust over TCP, no TLS
	clock  *Clock           // the server's wall clock; nil: the host's
	limits bool             // the server's default max_connections, not 300

	mu   sync.Mutex
	proc *process // the postmaster; its backends are its children
}

// StartPostgres initialises a PostgreSQL cluster in a new temporary
// directory (initdb, user postgres, trust authentication, without fsync),
// starts postgres on a free loopback port, and returns once the server
// answers. When the test runs as root, the server runs as the system user
// postgres, since PostgreSQL refuses root. The server and its backends are
// killed and the directory removed when the test ends. If PostgreSQL is
// not installed, StartPostgres skips the test (see Need).
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	return startPostgres(t, nil, nil)
}

// StartPostgresClock is StartPostgres for a server whose wall clock
// (clock_timestamp(), now()) is c, which the test steps (see Clock).
func StartPostgresClock(t testing.TB, c *Clock) *Postgres {
	t.Helper()
	return startPostgres(t, nil, c)
}

// StartPostgresDefaultLimits is StartPostgres with the server's default
// max_connections (100, 3 of them reserved for superusers) instead of the
// 300 that StartPostgres sets for tests that open many pools: for
// measurements at the limits an application meets.
func StartPostgresDefaultLimits(t testing.TB) *Postgres {
	t.Helper()
	return startPostgresLimits(t, nil, nil, true)
}

// PostgresOptions secures a server started by StartPostgresWith. The zero
// value asks for passwords on TCP and no TLS.
type PostgresOptions struct {
	// CertFile and KeyFile, if set, turn ssl on with this server
	// certificate and key (PEM files, such as a PKI's ServerCert and
	// ServerKey). The server gets its own copies, the key private to the
	// server's user, as PostgreSQL demands.
	CertFile, KeyFile string

	// CAFile, if set, holds the authorities whose client certificates
	// the server accepts (ssl_ca_file), for CertUsers.
	CAFile string

	// CertUsers are roles that log in over TLS with a client certificate
	// whose common name is the role's name (pg_hba "cert"), instead of a
	// password.
	CertUsers []string

	// SSLUsers are roles that must log in over TLS: their connections
	// without it are rejected (pg_hba "hostnossl ... reject").
	SSLUsers []string
}

// StartPostgresWith is StartPostgres for a server that authenticates TCP
// clients: every role logs in over TCP with a scram-sha-256 password (set
// with CREATE ROLE ... PASSWORD through DB), except opts.CertUsers, who
// present a client certificate over TLS; opts.SSLUsers may not log in
// without TLS; and with opts.CertFile the server speaks TLS. The
// superuser postgres logs in without a password on the server's Unix
// socket only, which DSN and DB use. The pg_hba.conf written reads:
//
//	local     all  all                      trust
//	hostnossl all  <SSLUsers>  127.0.0.1/32 reject
//	hostssl   all  <CertUsers> 127.0.0.1/32 cert
//	host      all  all         127.0.0.1/32 scram-sha-256
func StartPostgresWith(t testing.TB, opts PostgresOptions) *Postgres {
	t.Helper()
	return startPostgres(t, &opts, nil)
}

// startPostgres is StartPostgres, or StartPostgresWith when opts is set.
func startPostgres(t testing.TB, opts *PostgresOptions, clock *Clock) *Postgres {
	t.Helper()
	return startPostgresLimits(t, opts, clock, false)
}

// startPostgresLimits is startPostgres, with the server's default
// max_connections if defaultLimits is set.
func startPostgresLimits(t testing.TB, opts *PostgresOptions, clock *Clock, defaultLimits bool) *Postgres {
	t.Helper()
	p := &Postgres{bin: postgresBin(t, "postgres"), opts: opts, clock: clock, limits: defaultLimits}
	initdb := postgresBin(t, "initdb")
	// Not t.TempDir: its parents are private to root, and the socket path
	// must stay short.
	dir, err := os.MkdirTemp("", "dlock-postgres-")
	if err != nil {
		t.Fatalf("create postgres directory: %v", err)
	}
	p.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) }) // runs after the kill below
	uid, gid := -1, -1                      // the server's user, when it is not the test's
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root and there is no user postgres: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("chown %s: %v", dir, err)
		}
		p.prefix = []string{Need(t, "setpriv", "util-linux"), "--reuid=postgres", "--regid=postgres", "--init-groups", "--"}
	}
	cmd := append(slices.Clone(p.prefix), initdb, "-D", filepath.Join(dir, "data"),
		"-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if opts != nil {
		p.secure(t, uid, gid)
	}
	p.mu.Lock()
	p.startLocked(t)
	p.mu.Unlock()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err := p.killLocked(); err != nil {
			t.Errorf("stop postgres on port %d: %v", p.port, err)
		}
	})
	return p
}

// postgresBin returns the path of a PostgreSQL program: from PATH, or
// else from the newest /usr/lib/postgresql/*/bin, as Debian installs it.
func postgresBin(t testing.TB, name string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	slices.SortFunc(found, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	if len(found) > 0 {
		return found[len(found)-1]
	}
	return Need(t, name, "postgresql")
}

func pgVersion(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// startLocked starts postgres on p.dir's data, on p.port if it is set.
// p.mu must be held.
func (p *Postgres) startLocked(t testing.TB) {
	t.Helper()
	data := filepath.Join(p.dir, "data")
	args := func(port int) []string {
		a := append(slices.Clone(p.prefix[min(1, len(p.prefix)):]), p.bin,
			"-D", data,
			"-p", strconv.Itoa(port),
			"-k", p.dir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
		)
		if !p.limits {
			a = append(a, "-c", "max_connections=300")
		}
		if p.opts != nil {
			a = append(a, "-c", "password_encryption=scram-sha-256")
		}
		if p.opts != nil && p.opts.CertFile != "" {
			a = append(a, "-c", "ssl=on",
				"-c", "ssl_cert_file="+filepath.Join(p.dir, "server.crt"),
				"-c", "ssl_key_file="+filepath.Join(p.dir, "server.key"))
		}
		if p.opts != nil && p.opts.CAFile != "" {
			a = append(a, "-c", "ssl_ca_file="+filepath.Join(p.dir, "ca.crt"))
		}
		return a
	}
	bin := p.bin
	if len(p.prefix) > 0 {
		bin = p.prefix[0]
	}
	probe := func(port, pid int) error { return probePostgres(p.dsn(port), port, data) }
	p.proc, p.port = launchEnv(t, bin, p.dir, p.port, false, args, probe, p.clock.env())
}

// probePostgres connects to dsn and checks that the server on port is the
// one serving data.
func probePostgres(dsn string, port int, data string) error {
	db, err := sql.Open("pgx", dsn+"&connect_timeout=1")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got string
	if err := db.QueryRowContext(ctx, "SHOW data_directory").Scan(&got); err != nil {
		return err
	}
	if filepath.Clean(got) != filepath.Clean(data) {
		return fmt.Errorf("127.0.0.1:%d serves %s, not %s", port, got, data)
	}
	return nil
}

// dsn returns DSN for the server on port: over TCP, or for a server
// started by StartPostgresWith over its Unix socket, the one way the
// superuser logs in there without a password.
func (p *Postgres) dsn(port int) string {
	if p.opts != nil {
		return "postgres://postgres@/postgres?host=" + url.QueryEscape(p.dir) + "&port=" + strconv.Itoa(port) + "&sslmode=disable"
	}
	return "postgres://postgres@" + redisAddr(port) + "/postgres?sslmode=disable"
}

// DSN returns a github.com/jackc/pgx/v5/stdlib data source name (a URL)
// for the database "postgres" as user postgres: over TCP, or for a
// server started by StartPostgresWith over its Unix socket. It stays the
// same across Restart.
func (p *Postgres) DSN() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dsn(p.port)
}

// Addr returns the server's TCP address, 127.0.0.1:port.
func (p *Postgres) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return redisAddr(p.port)
}

// SocketDir returns the directory of the server's Unix socket
// (.s.PGSQL.<port>), as libpq's host parameter names it.
func (p *Postgres) SocketDir() string { return p.dir }

// Port returns the server's TCP port, which also names its Unix socket.
func (p *Postgres) Port() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.port
}

// DB returns a new *sql.DB (driver "pgx") for DSN, closed when the test
// ends.
func (p *Postgres) DB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", p.DSN())
	if err != nil {
		t.Fatalf("open %s: %v", p.DSN(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// secure writes the pg_hba.conf of StartPostgresWith and copies the TLS
// files into the server's directory, owned by the server's user uid:gid
// (-1 for the test's own), the key readable by that user only.
func (p *Postgres) secure(t testing.TB, uid, gid int) {
	t.Helper()
	hba := "local all all trust\n"
	if len(p.opts.SSLUsers) > 0 {
		hba += "hostnossl all " + strings.Join(p.opts.SSLUsers, ",") + " 127.0.0.1/32 reject\n"
	}
	if len(p.opts.CertUsers) > 0 {
		hba += "hostssl all " + strings.Join(p.opts.CertUsers, ",") + " 127.0.0.1/32 cert\n"
	}
	hba += "host all all 127.0.0.1/32 scram-sha-256\n"
	write := func(name string, data []byte, mode os.FileMode) {
		path := filepath.Join(p.dir, name)
		if name == "pg_hba.conf" {
			path = filepath.Join(p.dir, "data", name)
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		if err := os.Chmod(path, mode); err != nil { // WriteFile keeps an existing file's mode
			t.Fatalf("chmod %s: %v", path, err)
		}
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatalf("chown %s: %v", path, err)
		}
	}
	write("pg_hba.conf", []byte(hba), 0o600)
	copyFile := func(from, to string, mode os.FileMode) {
		if from == "" {
			return
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatalf("read %s: %v", from, err)
		}
		write(to, data, mode)
	}
	copyFile(p.opts.CertFile, "server.crt", 0o644)
	copyFile(p.opts.KeyFile, "server.key", 0o600)
	copyFile(p.opts.CAFile, "ca.crt", 0o644)
}

// Kill kills the postmaster and its backends with SIGKILL and waits until
// the postmaster has exited. Killing a server that is not running does
// nothing.
func (p *Postgres) Kill(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.killLocked(); err != nil {
		t.Fatalf("kill postgres on port %d: %v", p.port, err)
	}
}

func (p *Postgres) killLocked() error {
	if p.proc.exited() {
		return nil
	}
	// Stop the postmaster first so that it forks no new backend, then
	// kill the backends (each is its own process group) and the
	// postmaster.
	p.proc.signal(syscall.SIGSTOP)
	for _, pid := range descendants(p.proc.pid()) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return p.proc.kill()
}

// Pause stops the postmaster and every backend with SIGSTOP: open
// connections stay open but nothing is answered until Resume.
func (p *Postgres) Pause(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.proc.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("send SIGSTOP to postgres on port %d: %v", p.port, err)
	}
	pids := append([]int{p.proc.pid()}, descendants(p.proc.pid())...)
	for _, pid := range pids[1:] {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	if err := waitStopped(pids...); err != nil {
		t.Fatalf("pause postgres on port %d: %v", p.port, err)
	}
}

// Resume continues a server stopped by Pause with SIGCONT.
func (p *Postgres) Resume(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pid := range descendants(p.proc.pid()) {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := p.proc.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("send SIGCONT to postgres on port %d: %v", p.port, err)
	}
}

// Restart kills the server with SIGKILL if it is running and starts it
// again on the same address and the same data, as after a crash: what
// was committed is kept. It returns once the server answers.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.killLocked(); err != nil {
		t.Fatalf("kill postgres on port %d: %v", p.port, err)
	}
	p.startLocked(t)
}

// waitStopped waits until every thread of every process in pids is
// stopped, so that Pause returns only once the server answers nothing.
// Processes that have exited are ignored.
func waitStopped(pids ...int) error {
	deadline := time.Now().Add(killTimeout)
	for _, pid := range pids {
		for !stopped(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d not stopped %v after SIGSTOP", pid, killTimeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// stopped reports whether every thread of pid is stopped (or pid is
// gone).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", task.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 0 && fields[0] != "T" && fields[0] != "t" && fields[0] != "Z" && fields[0] != "X" {
			return false
		}
	}
	return true
}

// descendants returns the pids of root's children, grandchildren and so
// on, read from /proc.
func descendants(root int) []int {
	entries, _ := os.ReadDir("/proc")
	children := make(map[int][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
