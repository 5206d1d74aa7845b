package sqllock_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"

	"github.com/dlock-go/dlock"
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
