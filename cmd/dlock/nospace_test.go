package main

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestRunOnStoreOutOfSpace runs dlock against a Redis over its maxmemory
// (noeviction, the default policy), which refuses every write: run and
// lead exit 73 and say the store is out of space, instead of 74 ("cannot
// reach") that would send an operator to the network; lead stops rather
// than campaign forever.
func TestRunOnStoreOutOfSpace(t *testing.T) {
	r := testserver.StartRedis(t)
	if err := r.Client(t).ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory 1: %v", err)
	}
	store := r.URL("", "")
	for _, verb := range []string{"run", "lead"} {
		res := run(t, dlockCmd(t, verb, "--store", store, "job", "--", "true"))
		wantCode(t, res, exitNoSpace, verb+" on a Redis over maxmemory")
		if !strings.Contains(res.stderr, "out of space") || !strings.Contains(res.stderr, "OOM") {
			t.Errorf("%s on a Redis over maxmemory: stderr %q, want it to say the store is out of space, with the server's OOM message", verb, res.stderr)
		}
	}
}
