package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRunRedlockMasterDown: the adversary is one Redlock master of three
// that is down, its port refusing connections or silent (SIGSTOP). run
// releases with the two live masters: no "could not release" warning
// (it printed one, although the release succeeded, when the release
// waited for the dead master past run's one-second bound), -v says
// released, and an immediate --try run gets the lock.
func TestRunRedlockMasterDown(t *testing.T) {
	for _, down := range []string{"refused", "stopped"} {
		t.Run(down, func(t *testing.T) {
			addrs := []string{testserver.StartRedis(t).Addr(), testserver.StartRedis(t).Addr()}
			if down == "refused" {
				addrs = append(addrs, closedPort(t))
			} else {
				r := testserver.StartRedis(t)
				r.Pause(t)
				t.Cleanup(func() { r.Resume(t) })
				addrs = append(addrs, r.Addr())
			}
			store := "redlock://" + strings.Join(addrs, ",")
			r := run(t, dlockCmd(t, "run", "--store", store, "-v", "x", "--", "true"))
			t.Logf("dlock run with a master %s took %v", down, r.took)
			wantCode(t, r, 0, "run with a master "+down)
			if strings.Contains(r.stderr, "could not release") || !strings.Contains(r.stderr, `released "x"`) {
				t.Errorf("run with a master %s: stderr %q, want it to say released, with no warning", down, r.stderr)
			}
			r = run(t, dlockCmd(t, "run", "--store", store, "-n", "x", "--", "true"))
			t.Logf("dlock run -n with a master %s took %v", down, r.took)
			wantCode(t, r, 0, "run -n right after a run, with a master "+down)
		})
	}
}
