package testserver_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestStartRedisWith starts a server with a password, an ACL user and
// TLS with client certificates: Client gets in, and a client that lacks
// any one of them does not.
func TestStartRedisWith(t *testing.T) {
	pki := testserver.NewPKI(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{
		Password:    "adminpw",
		Users:       []string{"alice on >alicepw +ping"},
		PKI:         pki,
		ClientCerts: true,
	})
	admin := r.Client(t)
	if err := ping(admin); err != nil {
		t.Fatalf("PING as the default user = %v, want PONG", err)
	}
	tc := admin.Options().TLSConfig
	for _, tt := range []struct {
		what string
		opts redis.Options
		want string // in the error
	}{
		{"no password", redis.Options{TLSConfig: tc}, "NOAUTH"},
		{"alice", redis.Options{TLSConfig: tc, Username: "alice", Password: "alicepw"}, ""},
		{"alice, wrong password", redis.Options{TLSConfig: tc, Username: "alice", Password: "x"}, "WRONGPASS"},
		{"no TLS", redis.Options{Password: "adminpw", MaxRetries: -1}, "EOF"},
		{"no client certificate", redis.Options{TLSConfig: &tls.Config{RootCAs: tc.RootCAs, ServerName: tc.ServerName}, Password: "adminpw", MaxRetries: -1}, "certificate"},
	} {
		tt.opts.Addr = r.Addr()
		c := redis.NewClient(&tt.opts)
		err := ping(c)
		c.Close()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("PING with %s = %v, want PONG", tt.what, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("PING with %s = %v, want an error with %q", tt.what, err, tt.want)
		}
	}
}
