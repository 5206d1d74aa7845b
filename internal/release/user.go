package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// user builds programs in fresh modules outside the repository, with the
// file proxy first.
type user struct {
	dir     string
	env     []string
	version string
}

// program is a main package a user would write: the modules it gets and
// its source.
type program struct {
	name string
	gets []string // module@version; a module of the repository without @ gets the served version
	src  string
}

// built is what building a program measured.
type built struct {
	sumModules int             // distinct modules in its go.sum
	size       int64           // bytes of its binary
	linked     map[string]bool // modules linked into the binary (go version -m)
}

func (u *user) go_(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, u.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out), nil
}

// build makes a fresh module for p, gets its modules, tidies it and builds
// it.
func (u *user) build(p program) (built, error) {
	dir := filepath.Join(u.dir, p.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return built{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(p.src), 0o644); err != nil {
		return built{}, err
	}
	if _, err := u.go_(dir, "mod", "init", "example.com/"+p.name); err != nil {
		return built{}, err
	}
	for _, g := range p.gets {
		if !strings.Contains(g, "@") {
			g += "@" + u.version
		}
		if _, err := u.go_(dir, "get", g); err != nil {
			return built{}, err
		}
	}
	if _, err := u.go_(dir, "mod", "tidy"); err != nil {
		return built{}, err
	}
	bin := filepath.Join(dir, "prog")
	if _, err := u.go_(dir, "build", "-o", bin, "."); err != nil {
		return built{}, err
	}
	return measure(u, dir, bin)
}

func measure(u *user, dir, bin string) (built, error) {
	var b built
	info, err := os.Stat(bin)
	if err != nil {
		return b, err
	}
	b.size = info.Size()
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return b, err
	}
	seen := map[string]bool{}
	for line := range strings.Lines(string(sum)) {
		if f := strings.Fields(line); len(f) > 0 {
			seen[f[0]] = true
		}
	}
	b.sumModules = len(seen)
	out, err := u.go_(dir, "version", "-m", bin)
	if err != nil {
		return b, err
	}
	b.linked = map[string]bool{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "dep" || f[0] == "=>") {
			b.linked[f[1]] = true
		}
	}
	return b, nil
}

// requiredVersion returns the version of path that the go.mod in dir
// requires, or "" if it does not.
func requiredVersion(dir, path string) string {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return ""
	}
	f, err := modfile.ParseLax("go.mod", data, nil)
	if err != nil {
		return ""
	}
	for _, r := range f.Require {
		if r.Mod.Path == path {
			return r.Mod.Version
		}
	}
	return ""
}
