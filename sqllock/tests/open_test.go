package sqllock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/sqllock"
)

// testOpenURL opens url with dlock.Open and checks that its locks exclude
// those of a Locker on db (the same table) and that Close works.
func testOpenURL(t *testing.T, url string, other *dlock.Locker) {
	t.Helper()
	l, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want a Locker", url, err)
	}
	k := testkit.MustTryAcquire(t, l, "opened-by-url")
	testkit.WantNotAcquired(t, other, "opened-by-url", "while another owner holds it")
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Open(%q): Close = %v", url, err)
	}
}

func mysqlURL(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return "mysql://" + c.User + "@" + c.Addr + "/" + c.DBName
}

func TestOpenURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"mysql://root@h", `mysql:// needs the database name as its path`},
		{"mysql://root@h:1,h:2/db", `mysql:// takes one host`},
		{"mysql://root@h/db?sslmode=disable", `unknown parameter "sslmode" for mysql:// (known: table, migrate, clock_bound, max_conns, tls, tls_ca,`},
		{"postgres://u@h/db?bogus=1", `unknown parameter "bogus" for postgres://`},
		{"postgres://u@:5432/db", `missing host`},
		{"sqlite://relative/path.db", `sqlite:// takes an absolute path`},
		{"sqlite:///tmp/x.db?busy=1", `unknown parameter "busy" for sqlite:// (known: table, migrate, clock_bound, max_conns)`},
		{"sqlite:///tmp/x.db?clock_bound=soon", `clock_bound="soon": want a duration`},
		{"sqlite:///tmp/x.db?clock_bound=-1s", `clock_bound="-1s": want a duration`},
		{"sqlite:///tmp/x.db?migrate=maybe", `migrate="maybe": want true or false`},
		{"postgres://u@h/a/b", `postgres:// takes the database name as its path`},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q", tc.url, err, tc.want)
		}
	}
	// A bad table name is bad input too.
	url := "sqlite://" + filepath.Join(t.TempDir(), "x.db") + "?table=no-dashes"
	if l, err := dlock.Open(t.Context(), url); !errors.Is(err, dlock.ErrInvalid) {
		if l != nil {
			l.Close()
		}
		t.Errorf("Open(%q) = %v, want ErrInvalid", url, err)
	}
}

// TestOpenSQLiteNoMigrate checks that migrate=false creates no file and no
// table: a missing file is an error that says so, a file without the
// table holds nothing, and acquiring there says why it fails.
func TestOpenSQLiteNoMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	url := "sqlite://" + path + "?migrate=false"
	if l, err := dlock.Open(t.Context(), url); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "migrate=false") {
		if l != nil {
			l.Close()
		}
		t.Errorf("Open(%q) on a missing file = %v, want fs.ErrNotExist naming migrate=false", url, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(%s) after Open with migrate=false = %v, want fs.ErrNotExist", path, err)
	}
	db := openSQLite(t, path)
	if err := db.PingContext(t.Context()); err != nil { // creates the file, empty
		t.Fatal(err)
	}
	testNoMigrate(t, db, sqllock.SQLite, "sqlite://"+path)
}

// testNoMigrate opens store with migrate=false on a table that does not
// exist: Inspect and ForceRelease find nothing, Acquire fails saying why,
// and the table is still missing; once Migrate made it, the Locker works.
func testNoMigrate(t *testing.T, db *sql.DB, d sqllock.Dialect, store string) {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	table := "nomigrate_" + hex.EncodeToString(b[:])
	sep := "?"
	if strings.Contains(store, "?") {
		sep = "&"
	}
	url := store + sep + "table=" + table + "&migrate=false"
	l, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want a Locker", url, err)
	}
	defer l.Close()
	if hs, err := l.Inspect(t.Context()); len(hs) != 0 || err != nil {
		t.Errorf("Inspect() with migrate=false on a missing table = %v, %v, want no holders, nil", hs, err)
	}
	if held, err := l.ForceRelease(t.Context(), "n"); held || err != nil {
		t.Errorf("ForceRelease(%q) with migrate=false on a missing table = %v, %v, want false, nil", "n", held, err)
	}
	if k, err := l.TryAcquire(t.Context(), "n"); err == nil || errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "migrate=false") {
		if k != nil {
			k.Release(t.Context())
		}
		t.Errorf("TryAcquire(%q) with migrate=false on a missing table = %v, want an error naming migrate=false", "n", err)
	}
	if _, err := db.ExecContext(t.Context(), "SELECT COUNT(*) FROM "+table); err == nil {
		t.Fatalf("table %s exists after a Locker with migrate=false ran, want it missing", table)
	}
	if err := sqllock.Migrate(t.Context(), db, d, table); err != nil {
		t.Fatalf("Migrate(%q) = %v", table, err)
	}
	k := testkit.MustTryAcquire(t, l, "n")
	if hs, err := l.Inspect(t.Context()); len(hs) != 1 || hs[0].Fence != k.Fence() || err != nil {
		t.Errorf("Inspect() after Migrate = %+v, %v, want the lock with token %d", hs, err, k.Fence())
	}
	k.Release(t.Context())
}

// TestOpenHonoursContext opens mysql:// and postgres:// URLs with a 1 s
// context on a closed port and on a server that accepts connections but
// never answers: Open must give up when the context ends.
func TestOpenHonoursContext(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	})
	t.Cleanup(func() {
		silent.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	const timeout = time.Second
	for _, addr := range []string{closedAddr, silent.Addr().String()} {
		for _, url := range []string{"mysql://u@" + addr + "/db", "postgres://u@" + addr + "/db?sslmode=disable"} {
			type opened struct {
				l   *dlock.Locker
				err error
			}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			start := time.Now()
			ch := make(chan opened, 1)
			go func() { // returns at the latest when Cleanup closes the connections
				l, err := dlock.Open(ctx, url)
				ch <- opened{l, err}
			}()
			var o opened
			select {
			case o = <-ch:
			case <-time.After(timeout + 10*time.Second):
				t.Errorf("Open(%q) with a %v context has not returned after %v", url, timeout, time.Since(start))
				continue
			}
			l, err, took := o.l, o.err, time.Since(start)
			if l != nil {
				l.Close()
			}
			t.Logf("Open(%q) with a %v context: %v after %v", url, timeout, err, took)
			if err == nil || took > timeout+2*time.Second {
				t.Errorf("Open(%q) with a %v context = %v after %v, want an error within about %v", url, timeout, err, took, timeout)
			}
			if addr != closedAddr && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Open(%q) on a server that never answers = %v, want context.DeadlineExceeded", url, err)
			}
		}
	}
}

// testOpenPostgresLibpq opens postgres:// URLs as libpq reads them: the
// host parameter naming the server's Unix socket directory, and no
// database name (the user's, postgres, is the server's database).
func testOpenPostgresLibpq(t *testing.T, p *testserver.Postgres, other *dlock.Locker) {
	t.Setenv("PGDATABASE", "")
	port := strconv.Itoa(p.Port())
	for _, tc := range []struct{ name, url string }{
		{"SocketDir", "postgres://postgres@:" + port + "/postgres?host=" + p.SocketDir()},
		{"NoDatabase", "postgres://postgres@127.0.0.1:" + port + "?sslmode=disable"},
		{"SocketDirNoDatabase", "postgresql://postgres@:" + port + "?host=" + p.SocketDir()},
	} {
		t.Run(tc.name, func(t *testing.T) { testOpenURL(t, tc.url, other) })
	}
}

// TestOpenSQLiteProcesses starts processes together on new SQLite files,
// as the dlock demo does. SQLite can refuse a process without waiting
// while another switches the file to WAL mode; Open must ride that out,
// and the counter must still be exact.
func TestOpenSQLiteProcesses(t *testing.T) {
	const files, procs, rounds = 8, 6, 3
	for i := range files {
		dir := t.TempDir()
		store := "sqlite://" + filepath.Join(dir, "locks.db")
		counter := filepath.Join(dir, "counter")
		var ws []*testworker.Process
		for range procs {
			ws = append(ws, testworker.Start(t, "count", store, "n", counter, strconv.Itoa(rounds)))
		}
		for _, w := range ws {
			if err := w.Wait(t, time.Minute); err != nil {
				t.Fatalf("file %d: worker: %v; stderr:\n%s", i, err, w.Stderr())
			}
		}
		data, err := os.ReadFile(counter)
		if err != nil {
			t.Fatalf("file %d: read counter: %v", i, err)
		}
		if got := strings.TrimSpace(string(data)); got != strconv.Itoa(procs*rounds) {
			t.Fatalf("file %d: counter = %s, want %d", i, got, procs*rounds)
		}
	}
}
