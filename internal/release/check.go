package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// check is the publication test: it serves every published module of the
// working tree at version from a file module proxy, then resolves, builds
// and installs them from fresh modules outside the repository, as a user
// would, and measures what each program pulls in.
func check(root, version string) error {
	if err := checkRealVersions(root); err != nil {
		return err
	}
	if version == "" {
		v, err := headPseudoVersion(root)
		if err != nil {
			return err
		}
		version = v
	}
	work, err := os.MkdirTemp("", "dlock-publish-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tree := filepath.Join(work, "tree")
	if err := copyTree(root, tree); err != nil {
		return err
	}
	if err := pinTree(tree, version, true); err != nil {
		return err
	}
	proxy := filepath.Join(work, "proxy")
	mods, err := buildProxy(tree, proxy, version)
	if err != nil {
		return err
	}
	fmt.Printf("publish-check: %d modules served at %s from %s\n", len(mods), version, root)
	if err := purgeCache(); err != nil {
		return err
	}
	defer purgeCache()
	u := &user{dir: filepath.Join(work, "user"), env: append(proxyEnv(proxy), "GOBIN="+filepath.Join(work, "bin")), version: version}
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		return err
	}
	return u.run(mods, tree)
}

// headPseudoVersion is the pseudo-version of the commit checked out, the
// version a check is served at unless one is given.
func headPseudoVersion(root string) (string, error) {
	cmd := exec.Command("git", "log", "-1", "--format=%H %ct")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("read HEAD: %w", err)
	}
	var hash string
	var unix int64
	if _, err := fmt.Sscan(string(out), &hash, &unix); err != nil {
		return "", fmt.Errorf("read HEAD %q: %w", out, err)
	}
	return "v0.0.0-" + time.Unix(unix, 0).UTC().Format("20060102150405") + "-" + hash[:12], nil
}

// proxyEnv makes the go command read the repository's modules from the
// file proxy first, and everything else from the usual proxy, checking
// their sums as usual; the repository's modules have no sums to check.
func proxyEnv(proxy string) []string {
	orig := strings.TrimSpace(goEnv("GOPROXY"))
	if orig == "" || orig == "off" {
		orig = "https://proxy.golang.org,direct"
	}
	return append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+orig,
		"GONOSUMDB="+repoPrefix,
		"GOFLAGS=-mod=mod -modcacherw",
		"GOWORK=off",
	)
}

func goEnv(name string) string {
	out, _ := exec.Command("go", "env", name).Output()
	return string(out)
}

// purgeCache removes the repository's modules from the module cache, so
// that a check never reads a version an earlier check served.
func purgeCache() error {
	cache := strings.TrimSpace(goEnv("GOMODCACHE"))
	if cache == "" {
		return fmt.Errorf("go env GOMODCACHE is empty")
	}
	for _, p := range []string{filepath.Join(cache, "github.com", "dlock-go"), filepath.Join(cache, "cache", "download", "github.com", "dlock-go")} {
		filepath.WalkDir(p, func(p string, _ os.DirEntry, _ error) error {
			os.Chmod(p, 0o755)
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}
