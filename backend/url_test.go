package backend_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/backend"
)

func TestURLHosts(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // hosts joined by space, or the error's text
	}{
		{"x://h", "h:99"},
		{"x://h:1", "h:1"},
		{"x://h1:1,h2,h3:3", "h1:1 h2:99 h3:3"},
		{"x://[::1]:5", "[::1]:5"},
		{"x://", "dlock: bad store URL: x:// URL has no host"},
		{"x://:5", `dlock: bad store URL: missing host in ":5"`},
		{"x://h1,:5", `dlock: bad store URL: missing host in ":5"`},
		{"x://h:0", `dlock: bad store URL: bad port "0" for host "h"`},
		{"x://h:70000", `dlock: bad store URL: bad port "70000" for host "h"`},
		{"x://h2:x,h1:1", `dlock: bad store URL: bad port "x" for host "h2"`},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatalf("url.Parse(%q) = %v", tc.url, err)
		}
		hosts, err := backend.URLHosts(u, 99)
		got := strings.Join(hosts, " ")
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("URLHosts(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestURLParams(t *testing.T) {
	u, _ := url.Parse("x://h/?prefix=a&table=b")
	if q, err := backend.URLParams(u, "prefix", "table"); err != nil || q.Get("table") != "b" {
		t.Errorf("URLParams = %v, %v; want table=b", q, err)
	}
	u, _ = url.Parse("x://h/?prefix=a&prefix=b")
	if _, err := backend.URLParams(u, "prefix"); err == nil || err.Error() != `dlock: bad store URL: parameter "prefix" given 2 times` {
		t.Errorf("URLParams with a repeated parameter = %v", err)
	}
	u, _ = url.Parse("x://h/?bogus=1")
	if _, err := backend.URLParams(u, "prefix"); err == nil || err.Error() != `dlock: bad store URL: unknown parameter "bogus" for x:// (known: prefix)` {
		t.Errorf("URLParams with an unknown parameter = %v", err)
	}
}

// TestRedactURL: backend.RedactURL is internal/redact's URL, whose own
// test holds the cases; the adversary here is a copy that drifts.
func TestRedactURL(t *testing.T) {
	if got, want := backend.RedactURL("mysql://u:p@w@h:1/d"), "mysql://u:xxxxx@h:1/d"; got != want {
		t.Errorf("RedactURL(%q) = %q, want %q", "mysql://u:p@w@h:1/d", got, want)
	}
}
