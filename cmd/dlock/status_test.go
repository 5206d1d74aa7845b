package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestStatusSortedAndComplete(t *testing.T) {
	store := redisStore(t)
	l := testkit.MustOpen(t, store)
	for _, n := range []string{"b", "c", "a"} {
		k, err := l.TryAcquire(t.Context(), n, dlock.WithMetadata("host=h"))
		if err != nil {
			t.Fatal(err)
		}
		defer k.Release(t.Context())
	}
	r := run(t, dlockCmd(t, "status", "--store", store))
	wantCode(t, r, 0, "status")
	if a, b, c := strings.Index(r.stdout, `"a"`), strings.Index(r.stdout, `"b"`), strings.Index(r.stdout, `"c"`); a < 0 || a > b || b > c {
		t.Errorf("status not sorted by name:\n%s", r.stdout)
	}
	list := statusJSON(t, store, "free", "a")
	if len(list) != 2 || list[0]["name"] != "a" || list[1]["name"] != "free" {
		t.Fatalf("status --json = %v, want a then free", list)
	}
	for _, e := range list {
		for _, f := range []string{"name", "held", "fence", "remaining_ms", "owner", "metadata", "shared", "limit"} {
			if _, ok := e[f]; !ok {
				t.Errorf("status --json entry %v lacks %q", e, f)
			}
		}
	}
}

// statusJSON returns dlock status --json's entries for names.
func statusJSON(t *testing.T, store string, names ...string) []map[string]any {
	t.Helper()
	r := run(t, dlockCmd(t, append([]string{"status", "--store", store, "--json"}, names...)...))
	wantCode(t, r, 0, "status --json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return list
}

func TestStatusLeaseUnknown(t *testing.T) {
	// ZooKeeper cannot tell the lease left: its locks live as long as
	// their session.
	store := "zk://" + testserver.StartZooKeeper(t).Addr()
	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "z")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	r := run(t, dlockCmd(t, "status", "--store", store, "z"))
	wantCode(t, r, 0, "status on zk")
	if !strings.Contains(r.stdout, "unknown") || strings.Contains(r.stdout, " 0s ") {
		t.Errorf("status on zk printed\n%s\nwant the lease left shown as unknown", r.stdout)
	}
}

func TestStatusCreatesNothing(t *testing.T) {
	c := dlockCmd(t, "status")
	r := run(t, c)
	wantCode(t, r, 0, "status on a default store that does not exist")
	if !strings.Contains(r.stdout, "no locks") {
		t.Errorf("status printed %q, want that there are no locks", r.stdout)
	}
	state := envOf(c, "XDG_STATE_HOME")
	if _, err := os.Stat(filepath.Join(state, "dlock")); err == nil {
		t.Errorf("status created the default store's directory")
	}
	db := filepath.Join(t.TempDir(), "x.db")
	r = run(t, dlockCmd(t, "status", "--store", "sqlite://"+db))
	wantCode(t, r, 0, "status on a SQLite file that does not exist")
	if _, err := os.Stat(db); err == nil {
		t.Errorf("status created %s", db)
	}
}

// envOf returns the value c's environment gives key.
func envOf(c interface{ Environ() []string }, key string) string {
	var v string
	for _, kv := range c.Environ() {
		if rest, ok := strings.CutPrefix(kv, key+"="); ok {
			v = rest
		}
	}
	return v
}

func TestRunReleaseBoundedWhenStoreStops(t *testing.T) {
	pg := testserver.StartPostgres(t)
	store := "postgres://" + strings.TrimPrefix(pg.DSN(), "postgres://")
	dir := t.TempDir()
	c := dlockCmd(t, "run", "--store", store, "--ttl", "30s", "job", "--", "sh", "-c", `echo started > "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.02; done`, "sh", dir)
	done := start(t, c)
	waitFile(t, filepath.Join(dir, "started"), "started")
	pg.Pause(t) // the store stops answering
	defer pg.Resume(t)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exited := time.Now()
	r := <-done
	wantCode(t, r, 0, "run whose store stopped answering before the command exited")
	if d := time.Since(exited); d > 3*time.Second {
		t.Errorf("dlock exited %v after its command, want about a second", d)
	}
	if !strings.Contains(r.stderr, "the lease ends by itself") {
		t.Errorf("stderr = %q, want it to say the lease ends by itself", r.stderr)
	}
}
