package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testkit"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRunStoreDown(t *testing.T) {
	addr := closedPort(t)
	for _, store := range []string{
		"zk://" + addr,
		"etcd://" + addr,
		"redis://" + addr,
		"postgres://dlock@" + addr + "/dlock",
		"mysql://dlock@" + addr + "/dlock",
	} {
		for _, tc := range []struct {
			flags []string
			bound time.Duration
		}{
			{[]string{"--try", "--connect-timeout", "2s"}, 2 * time.Second},
			{[]string{"--wait", "1s"}, time.Second},
		} {
			args := append(append([]string{"run", "--store", store}, tc.flags...), "job", "--", "true")
			t.Run(strings.Join(args[2:len(args)-3], " "), func(t *testing.T) {
				t.Parallel()
				r := run(t, dlockCmd(t, args...))
				wantCode(t, r, exitStore, "run on a store that is down")
				if r.took > tc.bound+time.Second {
					t.Errorf("dlock %v took %v, want at most %v", args, r.took, tc.bound+time.Second)
				}
				if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "dlock: cannot reach store "+store+": ") || strings.Contains(lines[0], "dlock: dlock:") {
					t.Errorf("dlock %v: stderr = %q, want one line \"dlock: cannot reach store %s: ...\"", args, r.stderr, store)
				}
			})
		}
	}
}

// listener is a TCP listener that counts the connections it accepts:
// a store URL that points at it shows whether dlock contacted the store.
func listener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	go func() { // exits when the listener is closed
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), accepted
}

func TestUsageErrorsContactNothing(t *testing.T) {
	addr, accepted := listener(t)
	store := "redis://" + addr
	long := strings.Repeat("n", 256)
	for _, args := range [][]string{
		{"run"},
		{"run", "--store", store},
		{"run", "--store", store, "job"},
		{"run", "--store", store, "job", "--"},
		{"run", "--store", store, "--bogus", "job", "--", "true"},
		{"run", "--store", store, "--ttl", "10ms", "job", "--", "true"},
		{"run", "--store", store, "--ttl", "25h", "job", "--", "true"},
		{"run", "--store", store, "--ttl", "soon", "job", "--", "true"},
		{"run", "--store", store, "--wait", "-1", "job", "--", "true"},
		{"run", "--store", store, "--grace", "-1s", "job", "--", "true"},
		{"run", "--store", store, "--connect-timeout", "0", "job", "--", "true"},
		{"run", "--store", store, "--try", "--wait", "1", "job", "--", "true"},
		{"run", "--store", store, "-E", "300", "job", "--", "true"},
		{"run", "--store", store, "", "--", "true"},
		{"run", "--store", store, long, "--", "true"},
		{"run", "--store", store, "a", "b", "--", "true"},
		{"run", "--store", store + "/?bogus=1", "job", "--", "true"},
		{"run", "--store", store + "/notanumber", "job", "--", "true"},
		{"run", "--store", "nosuch://" + addr, "job", "--", "true"},
		{"run", "--store", "://" + addr, "job", "--", "true"},
		{"run", "--store", store, "--shared", "--limit", "2", "job", "--", "true"},
		{"run", "--store", store, "--limit", "0", "job", "--", "true"},
		{"run", "--store", store, "--limit", "-1", "job", "--", "true"},
		{"lead", "--store", store, "job"},
		{"lead", "--store", store, "--shared", "job", "--", "true"},
		{"lead", "--store", store, "--ttl", "10ms", "job", "--", "true"},
		{"observe", "--store", store},
		{"observe", "--store", store, long},
		{"observe", "--store", store, "--connect-timeout", "0", "job"},
		{"status", "--store", store, long},
		{"status", "--store", store + "/?bogus=1"},
		{"release", "--store", store, "job"},
		{"release", "--force", "--store", store, ""},
		{"demo", "--store", store, "--workers", "0"},
		{"demo", "--store", store, "--ttl", "1ms"},
		{"demo", "--store", store, "--ttl", "25h"},
	} {
		r := run(t, dlockCmd(t, args...))
		wantCode(t, r, exitUsage, fmt.Sprintf("dlock %q", args))
		if n := strings.Count(r.stderr, "dlock:"); n != 1 {
			t.Errorf("dlock %q: stderr = %q, want one \"dlock:\" line", args, r.stderr)
		}
	}
	time.Sleep(100 * time.Millisecond) // let a late connection show
	if n := accepted.Load(); n != 0 {
		t.Errorf("usage errors made %d connections to the store, want none", n)
	}
}

func TestRunFlags(t *testing.T) {
	store := redisStore(t)
	// Flags after NAME, before "--"; bare seconds.
	r := run(t, dlockCmd(t, "run", "job", "--ttl", "5", "--store", store, "--", "sh", "-c", `echo "$DLOCK_NAME"`))
	wantCode(t, r, 0, "run NAME --ttl 5 --store URL -- cmd")
	if strings.TrimSpace(r.stdout) != "job" {
		t.Errorf("command printed %q, want job", r.stdout)
	}
	// Without "--", the words after NAME are the command, flags included.
	r = run(t, dlockCmd(t, "run", "--store", store, "job", "sh", "-c", `echo "$0 $1"`, "-x", "--y"))
	wantCode(t, r, 0, "run NAME cmd -x")
	if strings.TrimSpace(r.stdout) != "-x --y" {
		t.Errorf("command printed %q, want \"-x --y\"", r.stdout)
	}

	k, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	for _, args := range [][]string{{"-n"}, {"-w", "0"}, {"--wait", "0"}} {
		r := run(t, dlockCmd(t, append(append([]string{"run", "--store", store}, args...), "busy", "--", "true")...))
		wantCode(t, r, exitNotAcquired, fmt.Sprintf("run %v on a held lock", args))
		if r.took > 5*time.Second {
			t.Errorf("run %v took %v, want no wait", args, r.took)
		}
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "-w", "0.3", "busy", "--", "true"))
	wantCode(t, r, exitNotAcquired, "run -w 0.3 on a held lock")
	r = run(t, dlockCmd(t, "run", "--store", store, "-n", "-E", "3", "--quiet", "busy", "--", "true"))
	wantCode(t, r, 3, "run -n -E 3 --quiet on a held lock")
	if r.stderr != "" {
		t.Errorf("run --quiet printed %q, want nothing", r.stderr)
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "--verbose", "-w", "0.5", "busy", "--", "true"))
	wantCode(t, r, exitNotAcquired, "run --verbose -w 0.5 on a held lock")
	if !strings.Contains(r.stderr, `waiting for "busy", held by`) || !strings.Contains(r.stderr, "store redis://") {
		t.Errorf("run --verbose printed %q, want the store and whom it waits for", r.stderr)
	}
	r = run(t, dlockCmd(t, "run", "--store", store, "--verbose", "free", "--", "true"))
	wantCode(t, r, 0, "run --verbose")
	for _, want := range []string{`acquired "free" (fence `, `released "free"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run --verbose printed %q, want %q", r.stderr, want)
		}
	}
	r = run(t, dlockCmd(t, "--version"))
	wantCode(t, r, 0, "--version")
	if !strings.HasPrefix(r.stdout, "dlock ") {
		t.Errorf("--version printed %q", r.stdout)
	}
}

func TestRunKeepsSecretsFromCommand(t *testing.T) {
	env := filepath.Join(t.TempDir(), "env")
	c := dlockCmd(t, "run", "job", "--", "sh", "-c", `env > "$1"`, "sh", env)
	c.Env = append(c.Env, "DLOCK_PASSWORD=hunter2", "DLOCK_STORE=mem://:hunter2@x")
	wantCode(t, run(t, c), 0, "run with secrets in the environment")
	data, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "hunter2") || strings.Contains(string(data), "DLOCK_PASSWORD") {
		t.Errorf("the command's environment holds the store's secrets:\n%s", data)
	}
	if !strings.Contains(string(data), "DLOCK_FENCE=") {
		t.Errorf("the command's environment lacks DLOCK_FENCE:\n%s", data)
	}
}
