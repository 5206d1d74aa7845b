package sqllock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testworker"
)

// testOpenURL opens url with dlock.Open and checks that its locks exclude
// those of a Locker on db (the same table) and that Close works.
func testOpenURL(t *testing.T, url string, other *dlock.Locker) {
	t.Helper()
	l, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want a Locker", url, err)
	}
	k := mustAcquire(t, l, "opened-by-url")
	wantNotAcquired(t, other, "opened-by-url")
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
		{"mysql://root@h/db?sslmode=disable", `unknown parameter "sslmode" for mysql:// (known: table)`},
		{"postgres://u@h/db?bogus=1", `unknown parameter "bogus" for postgres://`},
		{"postgres://u@:5432/db", `missing host`},
		{"sqlite://relative/path.db", `sqlite:// takes an absolute path`},
		{"sqlite:///tmp/x.db?busy=1", `unknown parameter "busy" for sqlite:// (known: table)`},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q", tc.url, err, tc.want)
		}
	}
	// A bad table name is bad input too.
	l, err := dlock.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "x.db")+"?table=no-dashes")
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer l.Close()
	if _, err := l.TryAcquire(t.Context(), "n"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("TryAcquire with table=no-dashes = %v, want ErrInvalid", err)
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
