package redislock_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// lockCommands are the commands a Locker sends, inside its scripts
// included (Redis checks those against the caller's ACL too). SCAN only
// serves Inspect of every name (dlock status without names); it is not
// limited by the key pattern.
var lockCommands = []string{
	"ping", "select", "subscribe", "evalsha", "eval", "scan",
	"time", "type", "exists", "get", "set", "del", "pttl", "pexpire",
	"hget", "hset", "hdel", "hgetall",
	"lindex", "lrange", "lpush", "rpush", "lpop", "lset", "lrem",
	"publish",
}

// lockACL returns the least-privilege ACL rules of a Locker under prefix
// ("" means the default), as after ACL SETUSER name on >password: its
// keys, its grant channels (prefix + "w:"), and lockCommands. The
// package documentation gives the same line.
func lockACL(prefix string, commands []string) string {
	if prefix == "" {
		prefix = redislock.DefaultPrefix
	}
	rules := "resetkeys ~" + prefix + "{* resetchannels &" + prefix + "w:* nocommands"
	for _, c := range commands {
		rules += " +" + c
	}
	return rules
}

// without returns lockCommands less c.
func without(c string) []string {
	var cs []string
	for _, x := range lockCommands {
		if x != c {
			cs = append(cs, x)
		}
	}
	return cs
}

// TestConformanceLeastPrivilege runs the conformance suite through
// dlock.Open over TLS, with a client certificate, as an ACL user granted
// exactly lockACL: so that grant is enough, and TLS works end to end.
func TestConformanceLeastPrivilege(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{
		Password:    "adminpw",
		Users:       []string{"locker on >lockerpw " + lockACL("", lockCommands)},
		PKI:         testserver.NewPKI(t),
		ClientCerts: true,
	})
	u := r.URL("locker", "lockerpw")
	h := harness(r.Client(t)) // the harness's own steps (Expire, Queued) as the admin
	h.NewLocker = func(t testing.TB) *dlock.Locker {
		t.Helper()
		l, err := dlock.Open(t.Context(), u)
		if err != nil {
			t.Fatalf("Open(%q) = %v, want a Locker", u, err)
		}
		return l
	}
	dlocktest.Run(t, h)
}

// TestDeniedWithoutGrant: a user lacking any one part of lockACL gets an
// error wrapping dlock.ErrDenied, from Open or from the first step that
// needs it, and at once: not a hang until ctx ends, not a silent "not
// acquired".
func TestDeniedWithoutGrant(t *testing.T) {
	full := lockACL("", lockCommands)
	cases := []struct {
		user  string
		rules string
		step  string // where the denial shows: "open", "try" (TryAcquire) or "handoff" (a Release that hands the name to a waiter)
	}{
		{"noping", lockACL("", without("ping")), "open"},
		{"nosubscribe", lockACL("", without("subscribe")), "open"},
		{"nochannel", strings.Replace(full, "&dw:*", "&other:*", 1), "open"},
		{"noevalsha", lockACL("", without("evalsha")), "try"},
		{"noeval", lockACL("", without("eval")), "try"}, // the script cache is flushed first
		{"notime", lockACL("", without("time")), "try"},
		{"noget", lockACL("", without("get")), "try"}, // the scripts' GET is a pcall
		{"noset", lockACL("", without("set")), "try"},
		{"nokeys", strings.Replace(full, "~d{*", "~other:*", 1), "try"},
		{"nopublish", lockACL("", without("publish")), "handoff"},
	}
	var users []string
	for _, c := range cases {
		users = append(users, c.user+" on >pw "+c.rules)
	}
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Users: users})
	admin := r.Client(t)
	for _, c := range cases {
		t.Run(c.user, func(t *testing.T) {
			if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			// Generous: a denial is one round trip; only a hang or a
			// retry loop reaches this.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			u := r.URL(c.user, "pw")
			err := deniedStep(ctx, t, u, c.step)
			if !errors.Is(err, dlock.ErrDenied) || ctx.Err() != nil {
				t.Fatalf("%s as %s = %v (ctx %v), want an error wrapping ErrDenied before ctx ends", c.step, c.user, err, ctx.Err())
			}
			if strings.Contains(err.Error(), ":pw@") {
				t.Errorf("%s as %s = %q, want no password in it", c.step, c.user, err)
			}
		})
	}
}

// deniedStep runs step (see TestDeniedWithoutGrant) on a Locker opened on
// u, and returns its error.
func deniedStep(ctx context.Context, t *testing.T, u, step string) error {
	t.Helper()
	l, err := dlock.Open(ctx, u)
	if step == "open" || err != nil {
		if err == nil {
			l.Close()
			return errors.New("Open succeeded")
		}
		return err
	}
	defer l.Close()
	name := t.Name()
	k, err := l.TryAcquire(ctx, name)
	if step == "try" || err != nil {
		if err == nil {
			k.Release(ctx)
			return errors.New("TryAcquire succeeded")
		}
		return err
	}
	waiter := testkit.MustOpen(t, u)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	got := testkit.AcquireAsync(wctx, waiter, name)
	for n := 0; n == 0; time.Sleep(10 * time.Millisecond) {
		if n, err = l.Waiters(ctx, name); err != nil {
			return err
		}
	}
	err = k.Release(ctx)
	stop()
	if r := <-got; r.Lock != nil {
		r.Lock.Release(ctx)
	}
	if err == nil {
		return errors.New("Release succeeded")
	}
	return err
}

// TestRequirePass: with requirepass, redis://:password@ works and a
// missing or wrong password is refused at Open with an error wrapping
// dlock.ErrDenied that does not contain the password.
func TestRequirePass(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Password: "s3cret-pass"})
	a, b := testkit.MustOpen(t, "redis://:s3cret-pass@"+r.Addr()), testkit.MustOpen(t, "redis://:s3cret-pass@"+r.Addr())
	k, err := a.TryAcquire(t.Context(), "n")
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", "n", err)
	}
	got := testkit.AcquireAsync(t.Context(), b, "n")
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if r := <-got; r.Err != nil || r.Lock.Fence() <= k.Fence() {
		t.Fatalf("waiting Acquire(%q) = %v, %v; want a lock with a fence above %d", "n", r.Lock, r.Err, k.Fence())
	} else {
		r.Lock.Release(t.Context())
	}
	for _, u := range []string{
		"redis://" + r.Addr(),
		"redis://:wrong-pass@" + r.Addr(),
		"redis://nobody:wrong-pass@" + r.Addr(),
	} {
		l, err := dlock.Open(t.Context(), u)
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, dlock.ErrDenied) || strings.Contains(err.Error(), "wrong-pass") {
			t.Errorf("Open(%q) = %v, want an error wrapping ErrDenied without the password", u, err)
		}
	}
}

// TestOpenTLS: rediss:// verifies the server's certificate against
// tls_ca, and presents tls_cert to a server that demands one; without
// tls_ca (the system's authorities, which do not know the test's), with a
// server name the certificate does not carry, or without the client
// certificate, Open fails; only tls_insecure_skip_verify=true, asked for
// by name, skips the check.
func TestOpenTLS(t *testing.T) {
	pki := testserver.NewPKI(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Password: "tls-pass", PKI: pki, ClientCerts: true})
	base := "rediss://:tls-pass@" + r.Addr() + "?"
	cert := "&tls_cert=" + url.QueryEscape(pki.ClientCert) + "&tls_key=" + url.QueryEscape(pki.ClientKey)
	ca := "tls_ca=" + url.QueryEscape(pki.CAFile)
	for _, tc := range []struct {
		query string
		want  string // in the error; "" for success
	}{
		{ca + cert, ""},
		{ca + cert + "&tls_server_name=localhost", ""},
		{"tls_insecure_skip_verify=true" + cert, ""},
		{"tls_insecure_skip_verify=false" + cert, "certificate signed by unknown authority"},
		{strings.TrimPrefix(cert, "&"), "certificate signed by unknown authority"},
		{ca + cert + "&tls_server_name=other.example", "other.example"},
		{ca, "denied by the store"},
	} {
		u := base + tc.query
		l, err := dlock.Open(t.Context(), u)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Open(%q) = %v, want a Locker", u, err)
				continue
			}
			if k, err := l.TryAcquire(t.Context(), "tls"); err != nil {
				t.Errorf("Open(%q): TryAcquire = %v, want a lock", u, err)
			} else {
				k.Release(t.Context())
			}
			l.Close()
			continue
		}
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded, want an error with %q", u, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "tls-pass") {
			t.Errorf("Open(%q) = %v, want an error with %q and without the password", u, err, tc.want)
		}
	}
	// Plain redis:// to a TLS server fails too.
	if l, err := dlock.Open(t.Context(), "redis://:tls-pass@"+r.Addr()); err == nil {
		l.Close()
		t.Errorf("Open(redis://) of a TLS server succeeded, want an error")
	}
}

// TestNeighbourCannotFree: a second Locker with the same credentials (the
// same ACL user) cannot release or refresh another owner's lock through
// dlock: its stale handle's Release and Refresh fail with ErrNotHeld and
// the holder keeps the name with its fencing token. The raw store is
// another matter: the same grant lets a client DEL the key, and then the
// holder's Done closes with ErrLost at its next renewal, and the next
// owner's token is higher.
func TestNeighbourCannotFree(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Users: []string{"locker on >pw " + lockACL("", lockCommands)}})
	u := r.URL("locker", "pw")
	holder, neighbour := testkit.MustOpen(t, u), testkit.MustOpen(t, u)
	const name = "shared-name"

	stale, err := neighbour.Acquire(t.Context(), name, dlock.WithTTL(time.Second), dlock.WithoutRenewal())
	if err != nil {
		t.Fatalf("neighbour's Acquire(%q) = %v, want a lock", name, err)
	}
	<-stale.Done() // its lease ran out
	k, err := holder.Acquire(t.Context(), name, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatalf("holder's Acquire(%q) = %v, want a lock", name, err)
	}
	if err := stale.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("neighbour's stale Release = %v, want ErrNotHeld", err)
	}
	if err := stale.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("neighbour's stale Refresh = %v, want ErrNotHeld", err)
	}
	if _, err := neighbour.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("neighbour's TryAcquire(%q) = %v, want ErrNotAcquired", name, err)
	}
	infos, err := neighbour.Inspect(t.Context(), name)
	if err != nil || len(infos) != 1 || infos[0].Fence != k.Fence() {
		t.Fatalf("Inspect(%q) = %+v, %v; want the holder with fence %d", name, infos, err, k.Fence())
	}
	if testkit.IsClosed(k.Done()) {
		t.Fatal("holder's Done closed after the neighbour's attempts")
	}
	if err := k.Refresh(t.Context()); err != nil {
		t.Fatalf("holder's Refresh = %v, want nil", err)
	}

	// The raw store: the lock user's own grant includes DEL on its keys.
	raw := redisClientAs(t, r.Addr(), "locker", "pw")
	if n, err := raw.Del(t.Context(), redislock.Key("", name)).Result(); n != 1 || err != nil {
		t.Fatalf("raw DEL as the lock user = %d, %v; want 1, nil", n, err)
	}
	select {
	case <-k.Done():
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("holder's Done cause = %v, want ErrLost", cause)
		}
	case <-time.After(30 * time.Second): // generous: the next renewal is due within 1 s
		t.Fatal("holder's Done still open 30s after the raw DEL")
	}
	next, err := neighbour.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("neighbour's TryAcquire(%q) after the DEL = %v, want a lock", name, err)
	}
	defer next.Release(t.Context())
	if next.Fence() <= k.Fence() {
		t.Errorf("Fence after the raw DEL = %d, want > the old holder's %d", next.Fence(), k.Fence())
	}
}

// redisClientAs returns a go-redis client for addr as user, closed when
// the test ends.
func redisClientAs(t *testing.T, addr, user, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestOpenTLSSentinelCluster: the tls_* parameters reach the Sentinel
// and Cluster clients. Neither runs over TLS here; both are pointed at a
// standalone TLS server that demands a client certificate: without
// tls_cert the server refuses the handshake (ErrDenied), with it the
// handshake succeeds and the server answers the client's first Sentinel
// or Cluster command, which it does not serve.
func TestOpenTLSSentinelCluster(t *testing.T) {
	pki := testserver.NewPKI(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{PKI: pki, ClientCerts: true})
	ca := "tls_ca=" + url.QueryEscape(pki.CAFile)
	cert := "&tls_cert=" + url.QueryEscape(pki.ClientCert) + "&tls_key=" + url.QueryEscape(pki.ClientKey)
	for _, tc := range []struct{ url, want string }{
		{"redis+cluster://" + r.Addr() + "?" + ca, "tls: certificate required"},
		{"redis+cluster://" + r.Addr() + "?" + ca + cert, "cluster support disabled"},
		{"redis+sentinel://" + r.Addr() + "/m?" + ca + cert, "sentinel"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		l, err := dlock.Open(ctx, tc.url)
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded, want an error with %q", tc.url, tc.want)
		} else if !strings.Contains(err.Error(), tc.want) || timedOut {
			t.Errorf("Open(%q) = %v, want an error with %q", tc.url, err, tc.want)
		}
	}
}

// TestDocumentedACL: the grant the package documentation and docs/security.md
// give is the one TestConformanceLeastPrivilege runs under.
func TestDocumentedACL(t *testing.T) {
	src, err := os.ReadFile("../redislock.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\tACL SETUSER locker on >password "):
			in = true
			doc = append(doc, strings.Fields(strings.TrimPrefix(line, "//\tACL SETUSER locker on >password "))...)
		case in && strings.HasPrefix(line, "//\t    "):
			doc = append(doc, strings.Fields(strings.TrimPrefix(line, "//\t"))...)
		default:
			in = false
		}
	}
	if got, want := strings.Join(doc, " "), lockACL("", lockCommands); got != want {
		t.Errorf("documented ACL = %q, want %q", got, want)
	}
	for _, db := range []int{0, 3} {
		lockUnderACL(t, strings.Join(doc, " "), db)
	}
	readme, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\tACL SETUSER") || strings.HasPrefix(line, "//\t    +") {
			block = append(block, "  "+strings.TrimPrefix(line, "//\t"))
		}
	}
	if want := strings.Join(block, "\n"); !strings.Contains(string(readme), want) {
		t.Errorf("docs/security.md lacks the package documentation's ACL:\n%s", want)
	}
}

// lockUnderACL opens database db of a server as a user granted exactly
// rules and takes, waits for and releases a lock there. The adversary is a
// grant that works on database 0 only: go-redis sends SELECT when it
// connects to any other, which an ACL without +select refuses.
func lockUnderACL(t *testing.T, rules string, db int) {
	t.Helper()
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Users: []string{"locker on >pw " + rules}})
	u := r.URL("locker", "pw") + "/" + strconv.Itoa(db)
	l, err := dlock.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("Open(%q) under the documented ACL = %v, want a Locker", u, err)
	}
	defer l.Close()
	k, err := l.TryAcquire(t.Context(), "n")
	if err != nil {
		t.Fatalf("TryAcquire(n) on database %d under the documented ACL = %v, want a lock", db, err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Errorf("Release(n) on database %d under the documented ACL = %v, want nil", db, err)
	}
}

// TestNewWithoutSubscribeDenied: a Locker made by New on a client whose
// user may not subscribe to its grant channel (Open refuses such a user;
// New cannot ask) fails its waits with ErrDenied instead of waiting
// unwoken, and so do its later waits.
func TestNewWithoutSubscribeDenied(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Users: []string{
		"full on >pw ~d{* &* +@all",
		"nochan on >pw ~d{* &other:* +@all",
	}})
	locker := func(user string) *dlock.Locker {
		c := redis.NewClient(&redis.Options{Addr: r.Addr(), Username: user, Password: "pw"})
		l, err := redislock.New(c, nil)
		if err != nil {
			t.Fatalf("New as %s = %v", user, err)
		}
		t.Cleanup(func() { l.Close(); c.Close() })
		return l
	}
	holder, waiter := locker("full"), locker("nochan")
	k, err := holder.TryAcquire(t.Context(), "n")
	if err != nil {
		t.Fatalf("TryAcquire(n) = %v, want a lock", err)
	}
	defer k.Release(t.Context())
	// Generous: only a waiter that is never told reaches this.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := waiter.Acquire(ctx, "n"); !errors.Is(err, dlock.ErrDenied) || ctx.Err() != nil {
			t.Fatalf("Got(waiting Acquire %d as a user without the grant channel) = %v (ctx %v), want ErrDenied before ctx ends", i+1, err, ctx.Err())
		}
	}
	if n, err := holder.Waiters(t.Context(), "n"); err != nil || n != 0 {
		t.Errorf("Got(Waiters(n) after the refused waits) = %d, %v; want 0", n, err)
	}
}
