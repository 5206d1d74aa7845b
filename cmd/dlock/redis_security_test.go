package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRunRedisTLSPassword runs dlock against a Redis that speaks only TLS
// and demands a client certificate and a password: with the password in
// $DLOCK_PASSWORD the command runs under the lock; with a wrong one dlock
// fails, says the store denied it, and prints neither password.
func TestRunRedisTLSPassword(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{
		Users:       []string{"locker on >right-pass ~d{* &dw:* +@all"},
		PKI:         testserver.NewPKI(t),
		ClientCerts: true,
	})
	store := r.URL("locker", "") // the password comes from $DLOCK_PASSWORD
	c := dlockCmd(t, "run", "--store", store, "job", "--", "sh", "-c", `echo "fence $DLOCK_FENCE"`)
	c.Env = append(c.Env, "DLOCK_PASSWORD=right-pass")
	res := run(t, c)
	wantCode(t, res, 0, "run over TLS with $DLOCK_PASSWORD")
	if !strings.HasPrefix(res.stdout, "fence ") || strings.TrimSpace(res.stdout) == "fence" {
		t.Errorf("run over TLS printed %q, want the fencing token", res.stdout)
	}
	c = dlockCmd(t, "run", "--store", store, "job", "--", "true")
	c.Env = append(c.Env, "DLOCK_PASSWORD=wrong-pass")
	res = run(t, c)
	wantCode(t, res, exitDenied, "run with a wrong password")
	if !strings.Contains(res.stderr, "denied access") {
		t.Errorf("run with a wrong password: stderr %q, want it to say the store denied access", res.stderr)
	}
	if out := res.stdout + res.stderr; strings.Contains(out, "wrong-pass") || strings.Contains(out, "right-pass") {
		t.Errorf("run with a wrong password printed a password:\n%s", out)
	}
}
