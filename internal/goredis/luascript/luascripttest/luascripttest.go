// Package luascripttest checks a package's Lua scripts against a real
// server, for the test modules of redislock and redlock.
package luascripttest

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// CheckScripts checks every script of scripts: no placeholder is left in
// its source, the server c compiles it (a syntax error would be reported
// with its file and line), and every .lua file of dir is a part of some
// script. It fails if scripts has fewer than atLeast scripts, so that a
// package that stopped registering them does not pass by checking none.
func CheckScripts(t *testing.T, c redis.UniversalClient, scripts map[string]*luascript.Script, dir string, atLeast int) {
	t.Helper()
	if len(scripts) < atLeast {
		t.Fatalf("%d scripts, want at least %d", len(scripts), atLeast)
	}
	used := map[string]bool{}
	for name, s := range scripts {
		if i := strings.Index(s.Source(), "{{"); i >= 0 {
			t.Errorf("%s: source holds %q at line %d", name, "{{", 1+strings.Count(s.Source()[:i], "\n"))
		}
		if err := s.Load(t.Context(), c); err != nil {
			t.Errorf("%s (%s): SCRIPT LOAD: %v", name, strings.Join(s.Files(), " + "), err)
		}
		for _, f := range s.Files() {
			used[path.Base(f)] = true
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lua") {
			files = append(files, e.Name())
			if !used[e.Name()] {
				t.Errorf("%s/%s is part of no script", dir, e.Name())
			}
		}
	}
	for f := range used {
		if !slices.Contains(files, f) {
			t.Errorf("a script's part %s is not in %s", f, dir)
		}
	}
}
