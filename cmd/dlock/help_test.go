package main

import (
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpDefaults: the adversary is pflag, which prints a duration
// flag's default from its value when the flag is declared: a default set
// afterwards showed as "(default 0s)", and a flag whose default is "no
// limit" got a second, false one.
func TestHelpDefaults(t *testing.T) {
	for _, sub := range []string{"run", "lead"} {
		r := run(t, dlockCmd(t, sub, "--help"))
		wantCode(t, r, 0, sub+" --help")
		for flag, want := range map[string]string{"--ttl": "(default 15s)", "--grace": "(default 10s)"} {
			line := helpLine(t, r.stdout, flag)
			if strings.Count(line, "(default") != 1 || !strings.Contains(line, want) {
				t.Errorf("%s --help shows %s as %q, want its default once: %s", sub, flag, line, want)
			}
		}
		if strings.Contains(r.stdout, "(default 0s)") {
			t.Errorf("%s --help shows a default of 0s:\n%s", sub, r.stdout)
		}
		if !strings.Contains(helpLine(t, r.stdout, "--ttl"), "DefaultTTL") {
			t.Errorf("%s --help does not say why --ttl's default is not the library's", sub)
		}
	}
	r := run(t, dlockCmd(t, "run", "--help"))
	if line := helpLine(t, r.stdout, "--wait"); strings.Count(line, "default") != 1 || !strings.Contains(line, "wait until acquired") {
		t.Errorf("run --help shows --wait as %q, want one default: wait until acquired", line)
	}
}

// helpLine returns the line of help that documents flag, with the lines
// its description wraps onto.
func helpLine(t *testing.T, help, flag string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(flag) + ` .*$`)
	line := re.FindString(help)
	if line == "" {
		t.Fatalf("help has no line for %s:\n%s", flag, help)
	}
	return line
}

// TestShortV: the adversary is cobra, which made -v --version at the root
// while run and lead have -v for --verbose. -v means --verbose wherever
// it exists, and nowhere else.
func TestShortV(t *testing.T) {
	r := run(t, dlockCmd(t, "-v"))
	wantCode(t, r, exitUsage, "dlock -v")
	if !strings.Contains(r.stderr, "-v") {
		t.Errorf("dlock -v: stderr %q, want it to name the unknown flag", r.stderr)
	}
	r = run(t, dlockCmd(t, "--help"))
	if strings.Contains(r.stdout, "-v, --version") {
		t.Errorf("dlock --help still offers -v for --version:\n%s", r.stdout)
	}
	r = run(t, dlockCmd(t, "run", "-v", "--store", "mem://", "job", "--", "true"))
	wantCode(t, r, 0, "run -v")
	if !strings.Contains(r.stderr, `acquired "job"`) {
		t.Errorf("run -v printed %q, want --verbose's lines", r.stderr)
	}
}

// TestVersion: the adversary is a build without a module version (go
// build in a checkout, go test), which printed "(devel)" and nothing
// else; the binary says what it knows, and always its Go version.
func TestVersion(t *testing.T) {
	r := run(t, dlockCmd(t, "--version"))
	wantCode(t, r, 0, "--version")
	if !strings.HasPrefix(r.stdout, "dlock ") || !strings.Contains(r.stdout, runtime.Version()) {
		t.Errorf("--version printed %q, want dlock's version and %s", r.stdout, runtime.Version())
	}
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-26T02:21:23Z", "vcs.modified", "true")},
			"(devel) 0123456789ab 2026-11-26T02:21:23Z modified (go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "(devel) (go1.26.8)"},
		{nil, "(devel) (" + runtime.Version() + ")"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

// TestObserveSaysWhatItSees: observe --help and docs/cli.md say per store
// what observe sees. The adversary is the claim that Redis pushes
// changes: it is read every 2 s, and two holds of 0.8 s and 0.3 s were
// reported as "free".
func TestObserveSaysWhatItSees(t *testing.T) {
	r := run(t, dlockCmd(t, "observe", "--help"))
	wantCode(t, r, 0, "observe --help")
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"observe --help": r.stdout, "docs/cli.md": string(doc)} {
		flat := strings.Join(strings.Fields(text), " ")
		for _, want := range []string{"etcd, ZooKeeper and SQLite (on Linux) push every change", "Redis (and SQLite elsewhere) is read every 2 s", "may not be shown"} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s does not say %q", what, want)
			}
		}
		if strings.Contains(flat, "Redis, ZooKeeper and etcd push") || strings.Contains(flat, "(Redis, ZooKeeper, etcd) push") {
			t.Errorf("%s still says Redis pushes changes", what)
		}
	}
}
