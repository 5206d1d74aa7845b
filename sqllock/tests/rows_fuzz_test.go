package sqllock_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/sqllock"
)

// FuzzRows feeds fuzzed names and metadata into the rows of every SQL
// dialect, on SQLite and on real PostgreSQL and MariaDB servers: names
// that differ in case, trailing spaces, collation-equal characters or
// bytes a driver might mangle must stay independent, and metadata must
// come back byte for byte. `make fuzz` runs it for a bounded time; the
// regular tests run its seed corpus and testdata/fuzz.
func FuzzRows(f *testing.F) {
	for _, s := range [][3]string{
		{"a", "A", ""},
		{"a", "a ", "trailing space"},
		{"straße", "strasse", "ß"},
		{"é", "e\u0301", "combining"},
		{"Ａ", "A", "fullwidth"},
		{"x'); DROP TABLE dlock_locks; --", "x", "'); --"},
		{"%", "_", "LIKE wildcards"},
		{`\`, `\\`, `\'`},
		{"🙂", "\U0001F642\u200d", "emoji"},
		{strings.Repeat("n", driver.MaxNameLen), strings.Repeat("n", driver.MaxNameLen-1), strings.Repeat("m", driver.MaxMetadataLen)},
	} {
		f.Add(s[0], s[1], s[2])
	}
	type store struct {
		dialect sqllock.Dialect
		a, b    *dlock.Locker
	}
	pair := func(db *sql.DB, d sqllock.Dialect) store {
		return store{d, newLocker(f, db, d, nil), newLocker(f, db, d, nil)}
	}
	stores := []store{
		pair(newSQLite(f), sqllock.SQLite),
		pair(testserver.StartPostgres(f).DB(f), sqllock.PostgreSQL),
		pair(testserver.StartMariaDB(f).DB(f), sqllock.MySQL),
	}
	f.Fuzz(func(t *testing.T, name, other, meta string) {
		for _, s := range stores {
			t.Run(s.dialect.String(), func(t *testing.T) {
				dlocktest.CheckRoundTrip(t, s.a, s.b, name, other, meta)
			})
		}
	})
}
