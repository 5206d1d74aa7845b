package backend_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

func TestTLSConfig(t *testing.T) {
	if c, err := backend.TLSConfig(url.Values{"prefix": {"x"}}, "h", false); c != nil || err != nil {
		t.Errorf("Got(TLSConfig without tls_ parameters) = %v, %v, want nil, nil", c, err)
	}
	c, err := backend.TLSConfig(url.Values{}, "db.example.com", true)
	if err != nil || c == nil || c.ServerName != "db.example.com" || c.InsecureSkipVerify || c.RootCAs != nil {
		t.Errorf("Got(TLSConfig on for a TLS scheme) = %+v, %v, want server name db.example.com, verified against the system's roots", c, err)
	}
	if c, err := backend.TLSConfig(url.Values{"tls": {"false"}}, "h", false); c != nil || err != nil {
		t.Errorf("Got(TLSConfig with tls=false) = %v, %v, want nil, nil", c, err)
	}
	if c, err := backend.TLSConfig(url.Values{"tls": {"true"}}, "h", false); c == nil || err != nil || c.RootCAs != nil {
		t.Errorf("Got(TLSConfig with tls=true) = %v, %v, want TLS verified against the system's roots", c, err)
	}
	if _, err := backend.TLSConfig(url.Values{"tls": {"false"}}, "h", true); !errors.Is(err, dlock.ErrBadURL) {
		t.Errorf("Got(TLSConfig with tls=false on a TLS scheme) = %v, want ErrBadURL", err)
	}
	c, err = backend.TLSConfig(url.Values{"tls_server_name": {"other"}}, "h", false)
	if err != nil || c == nil || c.ServerName != "other" {
		t.Errorf("Got(TLSConfig with tls_server_name) = %+v, %v, want TLS on with server name other", c, err)
	}

	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("secret-looking bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    url.Values
		want string
	}{
		{url.Values{"tls": {"preferred"}}, `tls "preferred" is neither true nor false`},
		{url.Values{"tls": {"false"}, "tls_ca": {notPEM}}, "tls=false with a TLS scheme or tls_ parameters"},
		{url.Values{"tls_insecure_skip_verify": {"yes"}}, `tls_insecure_skip_verify "yes" is neither true nor false`},
		{url.Values{"tls_ca": {filepath.Join(dir, "missing.pem")}}, "tls_ca: open"},
		{url.Values{"tls_ca": {notPEM}}, "holds no PEM certificate"},
		{url.Values{"tls_cert": {notPEM}}, "tls_cert and tls_key go together"},
		{url.Values{"tls_key": {notPEM}}, "tls_cert and tls_key go together"},
		{url.Values{"tls_cert": {notPEM}, "tls_key": {notPEM}}, "tls_cert"},
	} {
		_, err := backend.TLSConfig(tc.q, "h", false)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Got(TLSConfig(%v)) = %v, want ErrBadURL saying %q", tc.q, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-looking") {
			t.Errorf("Got(TLSConfig(%v)) = %v, which shows the file's contents", tc.q, err)
		}
	}
}
