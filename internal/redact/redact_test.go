package redact_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/redact"
)

// TestURL: the adversary is a password that a careless message would
// print, also in a URL that does not parse or parses other than its
// writer meant.
func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:pw@h:1/0":  "redis://u:xxxxx@h:1/0",
		"redis://h:1":         "redis://h:1",
		"redis://u:pw@h:bad":  "redis://u:xxxxx@h:bad",
		"sqlite:///a/b.db":    "sqlite:///a/b.db",
		"postgres://u@h/db":   "postgres://u@h/db",
		"mysql://u:p@w@h:1/d": "mysql://u:xxxxx@h:1/d",
		"redis://u:p#w@h:1/0": "redis://u:xxxxx@h:1/0",
		"redis://u:p/w@h:1/0": "redis://u:xxxxx@h:1/0",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestError: the adversary is an error that quotes the password, as it
// stands in the URL or as %q shows it; the scrubbed error still wraps
// the original for errors.Is.
func TestError(t *testing.T) {
	sentinel := errors.New("sentinel")
	for _, tc := range []struct{ url, msg string }{
		{"redis://u:s3cret@h:1", "bad value s3cret"},
		{"redis://u:s3c#ret@h:1", "bad fragment s3c#ret"},
		{"redis://u:s3c\tret@h:1", `bad value "s3c\tret"`},
	} {
		err := redact.Error(fmt.Errorf("%s: %w", tc.msg, sentinel), tc.url)
		if strings.Contains(err.Error(), "s3c") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("Error(%q, %q) = %q, want the password replaced by xxxxx", tc.msg, tc.url, err)
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("Error(%q, %q) = %v, which no longer wraps its cause", tc.msg, tc.url, err)
		}
	}
	if err := redact.Error(sentinel, "redis://u:s3cret@h:1"); err != sentinel {
		t.Errorf("Error(an error without the password) = %#v, want it unchanged", err)
	}
	if err := redact.Error(nil, "redis://u:s3cret@h:1"); err != nil {
		t.Errorf("Error(nil) = %v, want nil", err)
	}
	if got := redact.Error(errors.New("ab ab"), "redis://u:ab@h").Error(); got != "ab ab" {
		t.Errorf("Error with a 2-byte password = %q, want the message unchanged (too short to hide)", got)
	}
}
