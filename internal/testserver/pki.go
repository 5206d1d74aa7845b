package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority made for one test, with a
// server certificate for the loopback addresses and a client
// certificate, all as PEM files in a temporary directory. Nothing is
// checked in: every test run makes new keys.
type PKI struct {
	Dir string // the directory holding the files

	CAFile string // the authority's certificate (the clients' tls_ca)

	// ServerCert and ServerKey are a certificate for 127.0.0.1, ::1 and
	// "localhost", signed by the authority, usable for servers and
	// clients alike.
	ServerCert, ServerKey string

	// ClientCert and ClientKey are a client certificate with common name
	// "dlock", signed by the authority.
	ClientCert, ClientKey string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// ClientParams are a store URL's TLS parameters that trust p's authority
// and present p's client certificate: tls_ca, tls_cert and tls_key.
func (p *PKI) ClientParams() url.Values {
	return url.Values{"tls_ca": {p.CAFile}, "tls_cert": {p.ClientCert}, "tls_key": {p.ClientKey}}
}

// NewPKI makes a certificate authority, a server certificate and a
// client certificate in a temporary directory removed when the test
// ends. The directory and files are readable by every
// user, keys included, so that servers run under another user (postgres)
// can read them; a server that insists on a private key file's mode gets
// its own copy from its starter.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	// Not t.TempDir: its parent is private to root, and servers run as
	// another user (postgres) must reach the files.
	dir, err := os.MkdirTemp("", "dlock-pki-")
	if err != nil {
		t.Fatalf("create PKI directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("chmod %s: %v", dir, err)
	}
	p := &PKI{Dir: dir}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	p.caKey = key
	p.CAFile = p.write(t, "ca.crt", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey = p.Issue(t, "server", "localhost")
	p.ClientCert, p.ClientKey = p.Issue(t, "client", "dlock")
	return p
}

// Issue makes a certificate and key signed by the authority, with common
// name cn, valid for client and server use on 127.0.0.1, ::1 and
// "localhost", and returns the paths of their PEM files, named after
// file. Servers that map a client certificate's common name to a user
// (etcd) take cn as the user.
func (p *PKI) Issue(t testing.TB, file, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key for %s: %v", cn, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial for %s: %v", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(2)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatalf("create certificate for %s: %v", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key for %s: %v", cn, err)
	}
	return p.write(t, file+".crt", "CERTIFICATE", der), p.write(t, file+".key", "PRIVATE KEY", keyDER)
}

// write stores one PEM block in p.Dir and returns its path.
func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return path
}
