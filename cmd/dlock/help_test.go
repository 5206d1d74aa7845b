package main

import (
	"regexp"
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
