package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// repoPrefix is the module path of the root module; every module of the
// repository has it as a prefix.
const repoPrefix = "github.com/dlock-go/dlock"

// unpublished marks, in a comment of its go.mod, a module that is never
// tagged nor served: test-only modules and this tooling.
const unpublished = "dlock:unpublished"

// mod is a module of the repository.
type mod struct {
	Dir       string // relative to the repository root, "." for the root
	Path      string
	Published bool
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// findModules returns the modules under root, the published ones first,
// each group sorted by directory.
func findModules(root string) ([]mod, error) {
	var mods []mod
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		mods = append(mods, mod{Dir: dir, Path: modfile.ModulePath(data), Published: !bytes.Contains(data, []byte(unpublished))})
		return nil
	})
	sort.SliceStable(mods, func(i, j int) bool {
		if mods[i].Published != mods[j].Published {
			return mods[i].Published
		}
		return mods[i].Dir < mods[j].Dir
	})
	return mods, err
}

// pinTree rewrites every go.mod under root: each requirement of a module
// of the repository becomes version, and if dropReplaces each replace by
// a directory goes.
func pinTree(root, version string, dropReplaces bool) error {
	if !semver.IsValid(version) || semver.Major(version) != "v0" && semver.Major(version) != "v1" {
		return fmt.Errorf("version %q: want a semantic version v0.x.y or v1.x.y", version)
	}
	mods, err := findModules(root)
	if err != nil {
		return err
	}
	for _, m := range mods {
		if err := pin(filepath.Join(root, m.Dir, "go.mod"), version, dropReplaces); err != nil {
			return err
		}
	}
	return nil
}

func pin(file, version string, dropReplaces bool) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return err
	}
	for _, r := range f.Require {
		if inRepo(r.Mod.Path) {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return err
			}
		}
	}
	for _, r := range f.Replace {
		if dropReplaces && modfile.IsDirectoryPath(r.New.Path) {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}

func inRepo(path string) bool {
	return path == repoPrefix || strings.HasPrefix(path, repoPrefix+"/")
}

// escaped returns p as the module proxy protocol spells it in URLs.
func escaped(p string) string {
	e, err := module.EscapePath(p)
	if err != nil {
		return p
	}
	return e
}
