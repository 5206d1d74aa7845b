package redislock_test

import (
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// The fast paths of the acquire and release scripts (queue_fast.lua,
// release_handoff.lua) stand in for the general path's helpers in the
// cases the hot name runs. The adversary is a fast path that drifts from
// the general path: a check left out, an entry or value written in
// another shape, a reply that says something else. Each case below sets
// up the same state on two names, runs today's general path on one and
// the full script on the other, and wants the same reply, the same key
// and queue left behind (times and fencing tokens aside); and it runs the
// fast path alone (its script ending where common.lua would begin) to
// check which cases it takes, so that the comparison covers them.

// fastPathScripts are the scripts a fast-path case compares.
type fastPathScripts struct {
	full, general, head *luascript.Script
}

// generalTail ends a script that holds only fast paths: a reply no path
// gives, meaning the general path would have run.
const generalTail = "return 'general path'\n"

// assemble builds a script of the files of ../lua (and generalTail as
// "tail.lua"), with the placeholders the files use.
func assemble(t *testing.T, files ...string) *luascript.Script {
	t.Helper()
	fsys := fstest.MapFS{"lua/tail.lua": {Data: []byte(generalTail)}}
	vars := map[string]string{}
	for _, f := range files {
		if f == "lua/tail.lua" {
			continue
		}
		b, err := os.ReadFile("../" + f)
		if err != nil {
			t.Fatal(err)
		}
		fsys[f] = &fstest.MapFile{Data: b}
		for k, v := range maps.All(testhook.ScriptVars) {
			if strings.Contains(string(b), "{{"+k+"}}") {
				vars[k] = v
			}
		}
	}
	s, err := luascript.New(fs.FS(fsys), vars, files...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fastPathCase is one state and one call: setup writes the state of the
// name whose keys it is given; owner and args are the script's ARGV.
type fastPathCase struct {
	name  string
	setup func(t *testing.T, c *redis.Client, keys []string)
	args  []any
	fast  bool // the fast path alone answers
}

// runFastPathCase runs c on fresh names with the general and the full
// script and compares what they did; then checks that the fast path alone
// takes the case, or leaves it to the general path.
func runFastPathCase(t *testing.T, client *redis.Client, s fastPathScripts, c fastPathCase) {
	t.Helper()
	var got [2]string
	for i, script := range []*luascript.Script{s.general, s.full} {
		keys := nameKeys(fmt.Sprintf("fast-%s-%d", c.name, i))
		c.setup(t, client, keys)
		reply, err := script.Run(t.Context(), client, keys, c.args...).Result()
		if err != nil {
			t.Fatalf("%s: script = %v", c.name, err)
		}
		got[i] = fmt.Sprintf("reply %v\n", normalize(reply)) + stateOf(t, client, keys)
	}
	if got[0] != got[1] {
		t.Errorf("%s: the full script did\n%s\nwant what the general path did\n%s", c.name, got[1], got[0])
	}
	keys := nameKeys("fast-" + c.name + "-head")
	c.setup(t, client, keys)
	reply, err := s.head.Run(t.Context(), client, keys, c.args...).Result()
	if err != nil {
		t.Fatalf("%s: fast path alone = %v", c.name, err)
	}
	if fast := reply != "general path"; fast != c.fast {
		t.Errorf("%s: fast path alone replied %v, want it to take the case: %v", c.name, reply, c.fast)
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func nameKeys(name string) []string {
	k := redislock.Key("", name)
	return []string{k, k + ":q"}
}

// longNumber matches server times in ms and µs (and tokens made of them).
var longNumber = regexp.MustCompile(`[0-9]{13,}`)

// normalize makes a reply comparable across two runs a few ms apart:
// times and tokens become T, and a duration (an integer above 1000, in
// ms) is rounded to seconds.
func normalize(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case []string:
		return normalize(anys(x))
	case string:
		return longNumber.ReplaceAllString(packedFence(x), "T")
	case int64:
		if x > 1000 {
			return fmt.Sprintf("~%ds", int64(math.Round(float64(x)/1000)))
		}
	}
	return v
}

// packedFence replaces the 7-byte fence of a packed value or stamp (see
// packed) with "T".
func packedFence(s string) string {
	i := strings.IndexByte(s, '|')
	if i < 0 || len(s) < i+9 || s[i+1] < 'H' || s[i+1] > 'g' {
		return s
	}
	return s[:i+2] + "T" + s[i+9:]
}

// stateOf describes a name's keys: the lock key's value and lifetime, the
// queue's entries and lifetime.
func stateOf(t *testing.T, c *redis.Client, keys []string) string {
	t.Helper()
	ctx := t.Context()
	var v any
	var err error
	if c.Type(ctx, keys[0]).Val() == "hash" {
		var h map[string]string
		h, err = c.HGetAll(ctx, keys[0]).Result()
		v = fmt.Sprint(h) // fmt sorts a map's keys
	} else {
		v, err = c.Get(ctx, keys[0]).Result()
	}
	if err != nil && err != redis.Nil {
		t.Fatalf("reading %s = %v", keys[0], err)
	}
	q, err := c.LRange(ctx, keys[1], 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s = %v", keys[1], err)
	}
	kttl, qttl := c.PTTL(ctx, keys[0]).Val(), c.PTTL(ctx, keys[1]).Val()
	return fmt.Sprintf("key %v (pttl %v)\nqueue %v (pttl %v)", normalize(v), normalize(kttl.Milliseconds()), normalize(q), normalize(qttl.Milliseconds()))
}

// mustRun runs script on keys, failing the test on an error.
func mustRun(t *testing.T, c *redis.Client, s *luascript.Script, keys []string, args ...any) any {
	t.Helper()
	reply, err := s.Run(t.Context(), c, keys, args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", s.Files(), err)
	}
	return reply
}

// serverMS reads the server's clock in ms.
func serverMS(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// entry is a queue entry as the acquire script writes it (see
// lua/common.lua), written at ms on the server's clock.
func entry(owner string, ticket int, written, qexp int64, mode, meta string) string {
	return strings.Join([]string{owner, strconv.Itoa(ticket), "30000", strconv.FormatInt(written, 10), "3000", strconv.FormatInt(qexp, 10), mode, meta}, "|")
}

const chanp = redislock.DefaultPrefix + "w:" // the default prefix's grant channels

// acquireArgs are the acquire script's ARGV for owner (a lease of 30 s,
// the default clock bound).
func acquireArgs(owner, meta, queue, mode string, ticket int, takeover string) []any {
	return []any{owner, 30000, meta, queue, 3000, chanp, mode, ticket, takeover, 10000}
}

// releaseArgs are the release script's ARGV for owner.
func releaseArgs(owner string) []any { return []any{owner, 11000, chanp, 10000} }

// take, queue and release set up a state with the full scripts: owner
// takes the name, joins its queue, releases it.
func take(owner string) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		if r := mustRun(t, c, testhook.Scripts["acquire"], keys, acquireArgs(owner, "", "0", "x", 0, "")...); fmt.Sprint(r) == "" {
			t.Fatal("no reply")
		}
	}
}

func queue(owner, mode, meta string, ticket int) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		mustRun(t, c, testhook.Scripts["acquire"], keys, acquireArgs(owner, meta, "1", mode, ticket, "")...)
	}
}

func release(owner string) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		mustRun(t, c, testhook.Scripts["release"], keys, releaseArgs(owner)...)
	}
}

// steps runs setups in order.
func steps(fs ...func(*testing.T, *redis.Client, []string)) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		for _, f := range fs {
			f(t, c, keys)
		}
	}
}

// setValue writes a raw value under the lock key, for 30 s.
func setValue(v string) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		if err := c.Set(t.Context(), keys[0], v, 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// pushEntry appends a raw queue entry, made by mk from the server's time
// in ms.
func pushEntry(mk func(now int64) string) func(*testing.T, *redis.Client, []string) {
	return func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		if err := c.RPush(t.Context(), keys[1], mk(serverMS(t, c))).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// stampOf reads the stamp of the exclusive holder of keys: its value up
// to the renewal counter (see lua/value.lua), which a takeover names. It
// is parsed as the scripts parse it: the packed fence is binary, and a
// byte of it can be ',' or '|' (about 1 stamp in 26, from the fence's
// five bytes that vary; cutting at the first of those named a shorter
// stamp, and the takeover case failed in a whole test run).
func stampOf(t *testing.T, c *redis.Client, keys []string) string {
	t.Helper()
	v := c.Get(t.Context(), keys[0]).Val()
	_, _, rest, ok := testhook.ParseValue(v)
	if !ok {
		t.Fatalf("value %q of %s: not a holder's", v, keys[0])
	}
	return v[:len(v)-len(rest)]
}

// TestQueuedAcquireFastPath compares the queued acquire's fast path
// (queue_fast.lua) with the general path it stands in for.
func TestQueuedAcquireFastPath(t *testing.T) {
	client := testserver.StartRedis(t).Client(t)
	s := fastPathScripts{
		full:    testhook.Scripts["acquire"],
		general: assemble(t, "lua/value.lua", "lua/acquire_fast.lua", "lua/common.lua", "lua/acquire.lua"),
		head:    assemble(t, "lua/value.lua", "lua/acquire_fast.lua", "lua/queue_fast.lua", "lua/tail.lua"),
	}
	w := func(meta, queue, mode string, ticket int) []any {
		return acquireArgs("W:1", meta, queue, mode, ticket, "")
	}
	for _, c := range []fastPathCase{
		{"behind-holder", take("H:1"), w("", "1", "x", 1), true},
		{"behind-waiter", steps(take("H:1"), queue("X:1", "x", "", 1)), w("", "1", "x", 1), true},
		{"behind-handed-over", steps(take("H:1"), queue("X:1", "x", "", 1), release("H:1")), w("", "1", "x", 3), true},
		{"metadata", take("H:1"), w("job=7", "1", "x", 1), true},
		{"queue-expiring", steps(take("H:1"), pushEntry(func(now int64) string { return entry("X:1", 1, now, now+1000, "x", "") })), w("", "1", "x", 1), true},
		{"free", func(*testing.T, *redis.Client, []string) {}, w("", "1", "x", 1), true},
		{"keep-place", steps(take("H:1"), queue("W:1", "x", "", 1)), w("", "2", "x", 2), false},
		{"single-attempt", take("H:1"), w("", "0", "x", 0), false},
		{"shared", take("H:1"), w("", "1", "s", 1), false},
		{"semaphore-held", steps(queue("S:1", "3", "", 1)), w("", "1", "x", 1), false},
		{"re-enter", take("W:1"), w("", "1", "x", 1), false},
		{"no-ttl-recorded", setValue("H:1|123"), w("", "1", "x", 1), false},
		{"tombstone-and-queue", steps(setValue("|123"), pushEntry(func(now int64) string { return entry("X:1", 1, now, now+6000, "x", "") })), w("", "1", "x", 1), false},
	} {
		runFastPathCase(t, client, s, c)
	}
	// A takeover names the holder's stamp, which differs per name.
	takeover := fastPathCase{name: "takeover", fast: false}
	takeover.setup = func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		take("H:1")(t, c, keys)
		takeover.args = acquireArgs("W:1", "", "1", "x", 1, stampOf(t, c, keys))
	}
	takeover.args = acquireArgs("W:1", "", "1", "x", 1, "")
	runTakeoverCase(t, client, s, &takeover)
	// The same with a fence whose bytes include ',' and '|', the
	// separators of what follows a stamp: a reader that cut the stamp at
	// one would name a stamp no holder has.
	separators := fastPathCase{name: "takeover-separator-bytes", fast: false}
	separators.setup = func(t *testing.T, c *redis.Client, keys []string) {
		t.Helper()
		setValue(packed("H:1", 0x06_61_2C_7C_2C_7C_01, 30000, 0))(t, c, keys)
		separators.args = acquireArgs("W:1", "", "1", "x", 1, stampOf(t, c, keys))
	}
	runTakeoverCase(t, client, s, &separators)
}

// runTakeoverCase is runFastPathCase for a case whose args its setup
// writes.
func runTakeoverCase(t *testing.T, client *redis.Client, s fastPathScripts, c *fastPathCase) {
	t.Helper()
	var got [3]string
	for i, script := range []*luascript.Script{s.general, s.full, s.head} {
		keys := nameKeys(fmt.Sprintf("fast-%s-%d", c.name, i))
		c.setup(t, client, keys)
		got[i] = fmt.Sprint(normalize(mustRun(t, client, script, keys, c.args...)))
	}
	if got[0] != got[1] || got[2] != "general path" {
		t.Errorf("%s: general path replied %s, full script %s, fast path alone %s; want the first two equal and the fast path to leave the case to the general path", c.name, got[0], got[1], got[2])
	}
}

// TestReleaseHandoffFastPath compares the release's handoff fast path
// (release_handoff.lua) with the general path it stands in for.
func TestReleaseHandoffFastPath(t *testing.T) {
	client := testserver.StartRedis(t).Client(t)
	s := fastPathScripts{
		full:    testhook.Scripts["release"],
		general: assemble(t, "lua/value.lua", "lua/owner_held.lua", "lua/release_fast.lua", "lua/common.lua", "lua/release.lua"),
		head:    assemble(t, "lua/value.lua", "lua/owner_held.lua", "lua/release_fast.lua", "lua/release_handoff.lua", "lua/tail.lua"),
	}
	h := releaseArgs("H:1")
	stale := func(ticket int, ago, qexpIn int64, mode string) func(*testing.T, *redis.Client, []string) {
		return pushEntry(func(now int64) string { return entry("W:1", ticket, now-ago, now+qexpIn, mode, "") })
	}
	for _, c := range []fastPathCase{
		{"to-waiter", steps(take("H:1"), queue("W:1", "x", "", 1)), h, true},
		{"to-own-locker", steps(take("H:1"), queue("H:2", "x", "", 1)), h, true},
		{"ticket-0", steps(take("H:1"), queue("W:1", "x", "", 0)), h, true},
		{"metadata", steps(take("H:1"), queue("W:1", "x", "job=7", 1)), h, true},
		{"stale-entry", steps(take("H:1"), stale(1, 1000, 6000, "x")), h, true},
		{"queue-expiring", steps(take("H:1"), stale(1, 0, 1000, "x")), h, true},
		{"queue-too-far", steps(take("H:1"), stale(1, 0, 60000, "x")), h, true},
		{"handed-over", steps(take("H:1"), queue("X:1", "x", "", 1), queue("W:1", "x", "", 1), release("H:1")), releaseArgs("X:1"), true},
		{"nobody-waits", take("H:1"), h, true},
		{"dead-head", steps(take("H:1"), stale(1, 5000, 6000, "x"), queue("V:1", "x", "", 1)), h, false},
		{"shared-waiter", steps(take("H:1"), queue("W:1", "s", "", 1)), h, false},
		{"semaphore-waiter", steps(take("H:1"), pushEntry(func(now int64) string { return entry("W:1", 1, now, now+6000, "2", "") })), h, false},
		{"waiter-leaves", steps(take("H:1"), queue("W:1", "x", "", 1)), releaseArgs("W:1"), false},
		{"not-held", steps(take("X:1"), queue("W:1", "x", "", 1)), h, false},
		{"no-ttl-recorded", steps(setValue("H:1|123"), queue("W:1", "x", "", 1)), h, true},
		{"entry-without-owner", steps(take("H:1"), pushEntry(func(now int64) string { return entry("", 1, now, now+6000, "x", "") })), h, false},
	} {
		runFastPathCase(t, client, s, c)
	}
}
