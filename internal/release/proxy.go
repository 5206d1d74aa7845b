package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// copyTree copies the files git knows under root (tracked, and untracked
// but not ignored) to dst, as a checkout of the working tree would.
func copyTree(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("list the tree: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// buildProxy serves version of each published module of the tree at root
// (already pinned) from dir, in the layout of the module proxy protocol
// that GOPROXY=file://dir reads.
func buildProxy(root, dir, version string) ([]mod, error) {
	mods, err := findModules(root)
	if err != nil {
		return nil, err
	}
	var published []mod
	for _, m := range mods {
		if !m.Published {
			continue
		}
		published = append(published, m)
		if err := serve(filepath.Join(root, m.Dir), dir, m.Path, version); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Path, err)
		}
	}
	return published, nil
}

func serve(src, dir, path, version string) error {
	at := filepath.Join(dir, escaped(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	// CreateFromDir applies the proxy's rules: it leaves out nested
	// modules and vendor directories, and refuses files a module zip
	// cannot hold.
	if err := zip.CreateFromDir(z, module.Version{Path: path, Version: version}, src); err != nil {
		z.Close()
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644)
}
