package sqllock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
	"github.com/dlock-go/dlock/sqllock/internal/testhook"
)

// TestNoSpaceSQLite attacks a Locker with a database that cannot grow:
// a SQLite file limited to a few pages (max_page_count) fills up with
// names, and the Acquire that cannot write its row must say so with an
// error wrapping dlock.ErrNoSpace, not an anonymous driver error.
func TestNoSpaceSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.db")
	db, err := sql.Open("sqlite", sqliteDSN(path)+"&_pragma=max_page_count(16)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := sqllock.New(db, sqllock.SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	meta := dlock.WithMetadata(strings.Repeat("m", 1000))
	for i := range 10000 {
		name := fmt.Sprintf("%s-%d", strings.Repeat("n", 200), i)
		_, err := l.TryAcquire(t.Context(), name, meta)
		if err == nil {
			continue
		}
		if !errors.Is(err, dlock.ErrNoSpace) {
			t.Fatalf("TryAcquire(name %d) in a full database = %v, want ErrNoSpace", i, err)
		}
		if !strings.Contains(err.Error(), "full") {
			t.Errorf("TryAcquire(name %d) = %q, want the store's own words (full)", i, err)
		}
		return
	}
	t.Fatalf("10000 names of 1.2 kB fit in 16 pages: the page limit was not applied")
}

// TestClassifyNoSpace checks the classification of the servers' out of
// space errors, which a test cannot easily provoke on a real PostgreSQL
// or MariaDB (a full disk): each wraps dlock.ErrNoSpace and the store's
// error, and an error that only resembles one (out of memory) does not.
func TestClassifyNoSpace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "53100", Message: "could not extend file: No space left on device"}, true},
		{&pgconn.PgError{Code: "53200", Message: "out of memory"}, false},
		{&pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}, false},
		{&mysql.MySQLError{Number: 1114, Message: "The table 'dlock_locks' is full"}, true},
		{&mysql.MySQLError{Number: 1021, Message: "Disk full"}, true},
		{&mysql.MySQLError{Number: 1040, Message: "Too many connections"}, false},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1114}), true},
	} {
		got := testhook.Classify(tc.err)
		if errors.Is(got, dlock.ErrNoSpace) != tc.want || !errors.Is(got, tc.err) {
			t.Errorf("Classify(%v) = %v, want ErrNoSpace %v, wrapping the store's error", tc.err, got, tc.want)
		}
	}
}
