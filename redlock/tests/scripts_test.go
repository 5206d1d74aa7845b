package redlock_test

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

// TestScriptsAssemble checks every script of redlock: no placeholder is
// left in its source, the server compiles it (a syntax error would be
// reported with its file and line), and every file of redlock/lua is a
// part of some script.
func TestScriptsAssemble(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	if len(testhook.Scripts) < 6 {
		t.Fatalf("testhook.Scripts has %d scripts, want 6", len(testhook.Scripts))
	}
	used := map[string]bool{}
	for name, s := range testhook.Scripts {
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
	entries, err := os.ReadDir("../lua")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lua") {
			files = append(files, e.Name())
			if !used[e.Name()] {
				t.Errorf("lua/%s is part of no script", e.Name())
			}
		}
	}
	for f := range used {
		if !slices.Contains(files, f) {
			t.Errorf("a script's part %s is not in lua/", f)
		}
	}
}
