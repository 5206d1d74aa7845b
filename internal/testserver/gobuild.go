package testserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// GoServer describes a server that Debian does not package and that the
// tests therefore build from its own Go module, through the Go module proxy
// alone (for example nats-server, kube-apiserver).
type GoServer struct {
	// Name names the binary and its cache entry, for example "nats-server".
	Name string

	// Package is the main package to build, for example
	// "github.com/nats-io/nats-server/v2".
	Package string

	// Version is the version of Package's module, for example "v2.15.2".
	Version string

	// Replace lists go.mod replace directives, each "old => new" (for
	// example "k8s.io/api => k8s.io/api v0.37.2"), written before the
	// module graph is resolved.
	Replace []string

	// LDFlags, if set, is passed to go build as -ldflags.
	LDFlags string
}

// key returns the cache entry's name: the binary's name and version plus a
// digest of everything else that changes the binary.
func (s GoServer) key() string {
	sum := sha256.Sum256([]byte(strings.Join(append([]string{s.Package, s.Version, s.LDFlags}, s.Replace...), "\n")))
	return s.Name + "-" + s.Version + "-" + hex.EncodeToString(sum[:6])
}

// GoServerCache returns the directory that holds the Go-built servers:
// $DLOCK_SERVER_CACHE if set, else dlock-servers in the user's cache
// directory (~/.cache on Linux), so that a build survives between runs.
func GoServerCache() (string, error) {
	if dir := os.Getenv("DLOCK_SERVER_CACHE"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "dlock-servers"), nil
}

// Build returns the path of s's binary, building it first if the cache has
// none. Test processes that build the same server at once take turns on a
// file lock, so it is built once. A build that fails is a test failure
// under Require, and a skip otherwise (as a missing Debian server is).
func (s GoServer) Build(t testing.TB) string {
	t.Helper()
	bin, err := s.Path()
	if err == nil {
		return bin
	}
	if Require() {
		t.Fatalf("build %s %s from the Go module proxy: %v", s.Name, s.Version, err)
	} else {
		t.Skipf("%s not built (%v); run ./scripts/test or set DLOCK_REQUIRE_SERVERS=1", s.Name, err)
	}
	return ""
}

// Path builds s into its cache entry unless it is there already, and
// returns the binary's path.
func (s GoServer) Path() (string, error) {
	cache, err := GoServerCache()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, s.key())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, s.Name)
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := s.writeModule(dir); err != nil {
		return "", err
	}
	if err := goCommand(dir, "get", "-tool", s.Package+"@"+s.Version); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-o", bin + ".tmp"}
	if s.LDFlags != "" {
		args = append(args, "-ldflags", s.LDFlags)
	}
	if err := goCommand(dir, append(args, s.Package)...); err != nil {
		return "", err
	}
	return bin, os.Rename(bin+".tmp", bin) // whole, or not there
}

// writeModule writes the go.mod of the module that builds s: its replace
// directives, and a tool directive (added by go get -tool) that keeps the
// server's whole graph in go.sum.
func (s GoServer) writeModule(dir string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Builds %s for dlock's tests (internal/testserver GoServer).\nmodule dlock.test/%s\n\ngo 1.26\n", s.Name, s.Name)
	for _, r := range s.Replace {
		fmt.Fprintf(&b, "\nreplace %s\n", r)
	}
	return os.WriteFile(filepath.Join(dir, "go.mod"), b.Bytes(), 0o644)
}

// goCommand runs the go command in dir, outside any workspace, with a
// module graph it may update, and returns its output in the error.
func goCommand(dir string, args ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build test servers: %w", err)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, lastLines(out, logTailLines))
	}
	return nil
}

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// lockFile takes an exclusive lock on path, which it creates, and returns
// the function that releases it. The kernel drops the lock if the process
// dies, so a killed build never blocks the next one.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// NATSServer is nats-server, built from its module (Debian's package is
// too old for JetStream's per-key TTLs, which need 2.11).
var NATSServer = GoServer{
	Name:    "nats-server",
	Package: "github.com/nats-io/nats-server/v2",
	Version: "v2.15.2",
}

// GoServers lists every server the tests build from Go modules, for
// ./scripts/test to build them before the tests start (cmd/buildservers).
func GoServers() []GoServer {
	return []GoServer{NATSServer, KubeAPIServer}
}
