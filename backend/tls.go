package backend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/dlock-go/dlock"
)

// TLSParams are the store URL query parameters TLSConfig reads. Backends
// that speak TLS pass them to URLParams with their own parameters:
//
//	tls                       "true" speaks TLS, verified against the
//	                          system's roots, on a scheme that does not
//	                          always (mysql://, redlock://, ...); any tls_
//	                          parameter does too; "false" with a TLS
//	                          scheme or a tls_ parameter is an error
//	tls_ca                    PEM file of the certificate authorities that
//	                          sign the server's certificate (default: the
//	                          system's)
//	tls_cert, tls_key         PEM files of a client certificate and its key,
//	                          for servers that authenticate clients by
//	                          certificate; both or neither
//	tls_server_name           the name the server's certificate must carry
//	                          (default: the URL's host)
//	tls_insecure_skip_verify  "true" accepts any server certificate; only
//	                          for tests, and only when asked for by name
var TLSParams = []string{"tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure_skip_verify"}

// TLSConfig returns the TLS configuration q's TLSParams describe for a
// connection to host (the URL's host name, without a port), or nil when
// on is false and q has none of them: a backend passes on true for a
// scheme that always speaks TLS (rediss://, etcds://). The error wraps
// dlock.ErrBadURL and names the parameter and file at fault, never a
// file's contents.
func TLSConfig(q url.Values, host string, on bool) (*tls.Config, error) {
	for _, k := range TLSParams[1:] {
		on = on || q.Has(k)
	}
	switch v := q.Get("tls"); v {
	case "":
	case "true":
		on = true
	case "false":
		if on {
			return nil, fmt.Errorf("%w: tls=false with a TLS scheme or tls_ parameters: drop one or the other", dlock.ErrBadURL)
		}
	default:
		return nil, fmt.Errorf("%w: tls %q is neither true nor false (to skip verification, say tls_insecure_skip_verify=true)", dlock.ErrBadURL, v)
	}
	if !on {
		return nil, nil
	}
	c := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if v := q.Get("tls_server_name"); v != "" {
		c.ServerName = v
	}
	switch v := q.Get("tls_insecure_skip_verify"); v {
	case "", "false":
	case "true":
		c.InsecureSkipVerify = true
	default:
		return nil, fmt.Errorf("%w: tls_insecure_skip_verify %q is neither true nor false", dlock.ErrBadURL, v)
	}
	if f := q.Get("tls_ca"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: tls_ca: %w", dlock.ErrBadURL, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: tls_ca %q holds no PEM certificate", dlock.ErrBadURL, f)
		}
	}
	certFile, keyFile := q.Get("tls_cert"), q.Get("tls_key")
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: tls_cert and tls_key go together: give both or neither", dlock.ErrBadURL)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: tls_cert %q and tls_key %q: %w", dlock.ErrBadURL, certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// CertificateRefused reports whether err is a TLS alert by which the
// server refused the client's certificate (RFC 8446 section 6.2): a
// refusal no retry cures, which backends wrap with dlock.ErrDenied. Other
// alerts (a protocol version, an internal error) report false.
func CertificateRefused(err error) bool {
	var alert *net.OpError
	return errors.As(err, &alert) && alert.Op == "remote error" && refusedCert[alert.Err.Error()]
}

// refusedCert holds crypto/tls's texts of the alerts that refuse a
// client's certificate (its alert type is unexported; the texts are
// fixed).
var refusedCert = map[string]bool{
	"tls: bad certificate":               true,
	"tls: unsupported certificate":       true,
	"tls: revoked certificate":           true,
	"tls: expired certificate":           true,
	"tls: unknown certificate":           true,
	"tls: unknown certificate authority": true,
	"tls: access denied":                 true,
	"tls: certificate required":          true,
}
