package redislock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redislock"
)

func TestOpenURLs(t *testing.T) {
	r := testserver.StartRedis(t)
	cluster := testserver.StartRedisCluster(t, 3)
	sentinel := testserver.StartRedisSentinel(t)
	client := r.Client(t)
	for _, tc := range []struct {
		url string
		key string // where the lock on "n" must land, "" to skip the check
	}{
		{"redis://" + r.Addr(), redislock.Key("", "n")},
		{"redis://" + r.Addr() + "/3", ""},
		{"redis://" + r.Addr() + "/0?prefix=app:", "app:{n}"},
		{"redis+cluster://" + strings.Join(cluster.Addrs(), ","), ""},
		{"redis+sentinel://" + sentinel.Addr() + "/" + testserver.SentinelMaster, redislock.Key("", "n")},
	} {
		l, err := dlock.Open(t.Context(), tc.url)
		if err != nil {
			t.Errorf("Open(%q) = %v, want a Locker", tc.url, err)
			continue
		}
		k, err := l.TryAcquire(t.Context(), "n")
		if err != nil {
			t.Errorf("Open(%q): TryAcquire = %v", tc.url, err)
		} else {
			if tc.key != "" {
				if n, _ := client.Exists(t.Context(), tc.key).Result(); n != 1 {
					t.Errorf("Open(%q): lock key %q missing", tc.url, tc.key)
				}
			}
			k.Release(t.Context())
		}
		if err := l.Close(); err != nil {
			t.Errorf("Open(%q): Close = %v", tc.url, err)
		}
	}
}

func TestOpenURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://", "bad store URL: redis:// URL has no host"},
		{"redis://h:1,h:2", "bad store URL: redis:// takes one host; use redis+cluster:// or redis+sentinel:// for several"},
		{"redis://h:99999", `bad store URL: bad port "99999" for host "h"`},
		{"redis://h/x", `bad store URL: database "x" is not a number`},
		{"redis://h/0?table=t", `bad store URL: unknown parameter "table" for redis:// (known: prefix, wait_replicas, wait_timeout, clock_bound, tls, tls_ca, tls_cert, tls_key, tls_server_name, tls_insecure_skip_verify)`},
		{"rediss://h:1?tls_insecure_skip_verify=yes", `bad store URL: tls_insecure_skip_verify "yes" is neither true nor false`},
		{"redis+cluster://h:1?tls_cert=c.pem", "bad store URL: tls_cert and tls_key go together"},
		{"redis+sentinel://h:1/m?tls_ca=/nonexistent/ca.pem", "bad store URL: tls_ca: open /nonexistent/ca.pem"},
		{"redis://h:1/0?wait_replicas=x", `bad store URL: wait_replicas "x" is not a number`},
		{"redis://h:1/0?wait_replicas=-1", "bad store URL: negative WaitReplicas -1"},
		{"redis+sentinel://h:1/m?wait_timeout=5", `bad store URL: wait_timeout "5" is not a duration`},
		{"redis+cluster://h:1?wait_timeout=-1s", "bad store URL: negative WaitTimeout -1s"},
		{"redis+sentinel://h:1", "bad store URL: redis+sentinel:// needs the master name as its path"},
		{"redis+cluster://h:1/0", "bad store URL: redis+cluster:// takes no path"},
		{"redis://h:1/0?prefix=a{b}", `bad store URL: prefix "a{b}" contains a brace`},
		{"redis://h:1/0?clock_bound=10", `bad store URL: clock_bound "10" is not a duration`},
		{"redis://h:1/0?clock_bound=-1s", "bad store URL: negative ClockBound -1s"},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q", tc.url, err, tc.want)
		}
	}
	// A server that is not there: a connection error, password hidden.
	_, err := dlock.Open(t.Context(), "redis://user:s3cret@127.0.0.1:1")
	if err == nil || errors.Is(err, dlock.ErrBadURL) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "connect") {
		t.Errorf("Open of an unreachable server = %v, want a connection error without the password", err)
	}
}

// TestOpenDoesNotLog opens an unreachable server in a process of its own:
// go-redis logs the failed dials of a plain client to standard error, but
// nothing of the client dlock.Open made.
func TestOpenDoesNotLog(t *testing.T) {
	const dead = "127.0.0.1:1" // nothing listens on port 1
	plain := testworker.Start(t, "ping", "plain", dead)
	plain.Expect(t, "done", 30*time.Second)
	if err := plain.Wait(t, 10*time.Second); err != nil || !strings.Contains(plain.Stderr(), "redis: ") {
		t.Fatalf("plain go-redis client: exit %v, stderr %q; want go-redis's log line (else this test cannot fail)", err, plain.Stderr())
	}
	open := testworker.Start(t, "ping", "open", dead)
	open.Expect(t, "done", 30*time.Second)
	if err := open.Wait(t, 10*time.Second); err != nil || open.Stderr() != "" {
		t.Errorf("dlock.Open of an unreachable server: exit %v, stderr %q; want nothing on stderr", err, open.Stderr())
	}
}

// TestOpenHonoursRenewalDeadline: a Locker from dlock.Open sets go-redis's
// ContextTimeoutEnabled, so a renewal sent to a server that stopped
// answering ends at its deadline (the lock's loss deadline, 0.9 s after
// the last renewal for a 1 s lease), not after the client's 3 s
// ReadTimeout, which go-redis waits out otherwise.
func TestOpenHonoursRenewalDeadline(t *testing.T) {
	r := testserver.StartRedis(t)
	l, err := dlock.Open(t.Context(), "redis://"+r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	failed := make(chan hook.Renewal, 16)
	l.AddHook(hook.Hook{Renewed: func(e hook.Renewal) {
		if e.Failed > 0 {
			failed <- e
		}
	}})
	k, err := l.Acquire(t.Context(), "deadline", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.Pause(t)
	defer r.Resume(t)
	select {
	case e := <-failed:
		if e.Duration >= 2500*time.Millisecond {
			t.Errorf("a renewal to the paused server took %v, want it to end by its deadline (under 1 s), not after ReadTimeout (3 s)", e.Duration)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no failed renewal batch within 30s of pausing the server")
	}
	<-k.Done()
}
