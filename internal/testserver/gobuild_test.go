package testserver_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestGoServersBuild builds (or finds cached) every server the tests build
// from Go modules, and runs each binary: a broken recipe, a version the
// proxy refuses or a stale cache entry of the wrong version fails here,
// not deep inside a backend's suite.
func TestGoServersBuild(t *testing.T) {
	for _, s := range testserver.GoServers() {
		t.Run(s.Name, func(t *testing.T) {
			bin := s.Build(t)
			out, err := exec.Command(bin, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", bin, err, out)
			}
			if !strings.Contains(string(out), s.Version) {
				t.Fatalf("%s --version printed %q, want it to name %s", bin, out, s.Version)
			}
		})
	}
}
