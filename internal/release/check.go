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
		v, err := runVersion(root)
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
	if err := purgeCache(version); err != nil {
		return err
	}
	defer purgeCache(version)
	u := &user{dir: filepath.Join(work, "user"), env: append(proxyEnv(proxy), "GOBIN="+filepath.Join(work, "bin")), version: version}
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		return err
	}
	return u.run(mods, tree)
}

// headPseudoVersion is the pseudo-version of the commit checked out.
// runVersion is the version a check is served at unless one is given:
// a pseudo-version of the commit checked out, stamped with the time of the
// check rather than of the commit, so that every check has a version of
// its own (the working tree may differ from the commit).
func runVersion(root string) (string, error) {
	v, err := headPseudoVersion(root)
	if err != nil {
		return "", err
	}
	return "v0.0.0-" + time.Now().UTC().Format("20060102150405") + v[len("v0.0.0-20060102150405"):], nil
}

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

// purgeCache removes version of the repository's modules from the module
// cache, so that a check never reads what an earlier check served at the
// same version, and leaves nothing behind. Other versions stay: checks
// running at once (each at a version of its own) do not disturb each
// other.
func purgeCache(version string) error {
	cache := strings.TrimSpace(goEnv("GOMODCACHE"))
	if cache == "" {
		return fmt.Errorf("go env GOMODCACHE is empty")
	}
	var doomed []string
	filepath.WalkDir(filepath.Join(cache, "github.com", "dlock-go"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(d.Name(), "@"+version) {
			doomed = append(doomed, p)
			return filepath.SkipDir
		}
		return nil
	})
	filepath.WalkDir(filepath.Join(cache, "cache", "download", "github.com", "dlock-go"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), version+".") {
			doomed = append(doomed, p)
		}
		return nil
	})
	for _, p := range doomed {
		filepath.WalkDir(p, func(q string, _ os.DirEntry, _ error) error {
			os.Chmod(q, 0o755)
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}
