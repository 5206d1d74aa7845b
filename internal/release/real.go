package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// checkRealVersions fails unless every go.mod under root requires each
// module of the repository at a real version: a tag of the repository,
// or the pseudo-version of one of its commits. A replace lets a made-up
// version build inside the repository, but the replace is dropped when
// the module is published, and the version is then all a user has.
func checkRealVersions(root string) error {
	mods, err := findModules(root)
	if err != nil {
		return err
	}
	var bad []string
	for _, m := range mods {
		file := filepath.Join(root, m.Dir, "go.mod")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(file, data, nil)
		if err != nil {
			return err
		}
		for _, r := range f.Require {
			if inRepo(r.Mod.Path) && !realVersion(root, r.Mod.Path, r.Mod.Version) {
				bad = append(bad, fmt.Sprintf("%s/go.mod requires %s %s, which is neither a tag nor a commit of the repository", m.Dir, r.Mod.Path, r.Mod.Version))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "\n  "))
	}
	return nil
}

func realVersion(root, path, version string) bool {
	git := func(args ...string) bool {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		return cmd.Run() == nil
	}
	if module.IsPseudoVersion(version) {
		rev, err := module.PseudoVersionRev(version)
		if err != nil || strings.Trim(rev, "0") == "" {
			return false // the zero pseudo-version names no commit
		}
		// A shallow clone (as some CI checkouts are) may lack the
		// commit: only a full history can refute it.
		return git("cat-file", "-e", rev+"^{commit}") || shallow(root)
	}
	tag := version
	if dir := strings.TrimPrefix(strings.TrimPrefix(path, repoPrefix), "/"); dir != "" {
		tag = dir + "/" + version
	}
	return git("rev-parse", "-q", "--verify", "refs/tags/"+tag)
}

// shallow reports whether the clone at root lacks part of its history.
func shallow(root string) bool {
	cmd := exec.Command("git", "rev-parse", "--is-shallow-repository")
	cmd.Dir = root
	out, err := cmd.Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}
