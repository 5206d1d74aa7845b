package sqllock_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The drivers' import paths, as go list -deps prints their packages.
const (
	pgxPath   = "github.com/jackc/pgx/"
	mysqlPath = "github.com/go-sql-driver/mysql"
)

// goTool runs the go command found on PATH (the one running the tests,
// under go test), in dir, and returns its standard output.
func goTool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s = %v, want success\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// linksPath reports whether deps, go list -deps's output, has a package
// under path.
func linksPath(deps, path string) bool {
	return slices.ContainsFunc(strings.Fields(deps), func(p string) bool { return strings.HasPrefix(p, path) })
}

// TestLinkedDrivers checks that a program links only the SQL driver of the
// dialect package it imports: sqllock itself links neither pgx nor
// go-sql-driver/mysql, sqllock/postgres only pgx, sqllock/mysql only
// go-sql-driver/mysql. The adversary is a convenience import that drags
// the other stack back in: the core importing a dialect package so that
// every scheme works out of the box, a helper shared through a package
// that imports a driver, or one dialect package reusing the other's URL
// parsing. It runs go list from sqllock's own module, as a user's build
// resolves it.
func TestLinkedDrivers(t *testing.T) {
	for _, tc := range []struct {
		pkg         string
		links, not  []string
		explanation string
	}{
		{"github.com/dlock-go/dlock/sqllock", nil, []string{pgxPath, mysqlPath},
			"the core must link no driver: a program that uses only SQLite, or one dialect, pays for none of the others"},
		{"github.com/dlock-go/dlock/sqllock/postgres", []string{pgxPath}, []string{mysqlPath},
			"a PostgreSQL-only program must not link go-sql-driver/mysql"},
		{"github.com/dlock-go/dlock/sqllock/mysql", []string{mysqlPath}, []string{pgxPath},
			"a MySQL-only program must not link pgx"},
	} {
		t.Run(filepath.Base(tc.pkg), func(t *testing.T) {
			deps := goTool(t, "..", "list", "-deps", tc.pkg)
			for _, p := range tc.links {
				if !linksPath(deps, p) {
					t.Errorf("go list -deps %s has no package of %s, want it linked (is the check looking at the right thing?)", tc.pkg, p)
				}
			}
			for _, p := range tc.not {
				if linksPath(deps, p) {
					t.Errorf("go list -deps %s links %s, want not: %s", tc.pkg, p, tc.explanation)
				}
			}
		})
	}
}

// TestUnlinkedDialect runs a program that uses sqllock without importing
// sqllock/postgres or sqllock/mysql (testdata/unlinked): New and Migrate
// with their dialect fail with an error wrapping dlock.ErrInvalid that
// names the import to add, as database/sql's "unknown driver (forgotten
// import?)" does, and dlock.Open of their schemes fails with one wrapping
// dlock.ErrBadURL that names it; SQLite needs no dialect package.
func TestUnlinkedDialect(t *testing.T) {
	deps := goTool(t, ".", "list", "-deps", "./testdata/unlinked")
	if linksPath(deps, pgxPath) || linksPath(deps, mysqlPath) {
		t.Fatalf("testdata/unlinked links a SQL driver, want none: it would not show what a program without the imports gets")
	}
	const pg, my = `import _ "github.com/dlock-go/dlock/sqllock/postgres"`, `import _ "github.com/dlock-go/dlock/sqllock/mysql"`
	want := map[string]string{
		"new-postgresql":     "err true false " + pg,
		"migrate-postgresql": "err true false " + pg,
		"new-mysql":          "err true false " + my,
		"migrate-mysql":      "err true false " + my,
		"new-sqlite":         "ok",
		"open-postgres":      "err false true " + pg,
		"open-postgresql":    "err false true " + pg,
		"open-mysql":         "err false true " + my,
	}
	got := map[string]string{}
	for line := range strings.Lines(goTool(t, ".", "run", "./testdata/unlinked")) {
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[name] = rest
	}
	for name, w := range want {
		outcome, hint, _ := strings.Cut(w, " "+`import`)
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: no line, want %q", name, w)
		case !strings.HasPrefix(g, outcome) || (hint != "" && !strings.Contains(g, "import"+hint)):
			t.Errorf("%s = %q, want %q (errors.Is ErrInvalid, ErrBadURL, then the import to add)", name, g, w)
		}
	}
}
