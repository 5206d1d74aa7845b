package luascript_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
	"github.com/dlock-go/dlock/internal/testserver"
)

// parts holds the scripts of these tests (testdata/*.lua). part1.lua
// and part2.lua are a script of two parts: the second fails at its line 3
// with error(), or at its line 5 with the error of a command, when
// ARGV[1] asks it to. a.lua lacks its last newline on purpose.
var parts = os.DirFS("testdata")

func newParts(t *testing.T) *luascript.Script {
	t.Helper()
	s, err := luascript.New(parts, map[string]string{"n": "21"}, "part1.lua", "part2.lua")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// wantAt checks that err names file:line and no line of the assembled
// source, and that the server's error is still in its chain.
func wantAt(t *testing.T, err error, at ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one naming %v", at)
	}
	for _, a := range at {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error = %q, want it to name %s", err, a)
		}
	}
	if strings.Contains(err.Error(), "user_script") {
		t.Errorf("error = %q, still names a line of the assembled source", err)
	}
	var re redis.Error
	if !errors.As(err, &re) {
		t.Errorf("error %q (%T) holds no redis.Error", err, err)
	}
}

func TestRun(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	s := newParts(t)
	n, err := s.Run(t.Context(), c, []string{"k"}, "none").Int()
	if err != nil || n != 42 {
		t.Fatalf("Run = %d, %v, want 42 ({{n}} filled)", n, err)
	}
}

func TestRuntimeErrorNamesPart(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	s := newParts(t)
	// Run: EVALSHA, then EVAL, as the server has not cached the script.
	err := s.Run(t.Context(), c, []string{"k"}, "error").Err()
	t.Logf("Run: %v", err)
	wantAt(t, err, "part2.lua:3: boom", "@part2.lua:3.")
	// Cached now: EVALSHA alone.
	wantAt(t, s.EvalSha(t.Context(), c, []string{"k"}, "error").Err(), "part2.lua:3: boom")
	wantAt(t, s.Eval(t.Context(), c, []string{"k"}, "error").Err(), "part2.lua:3: boom")
}

func TestPipelineErrorNamesPart(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	s := newParts(t)
	pipe := c.Pipeline()
	cmd := s.Eval(t.Context(), pipe, []string{"k"}, "error")
	ok := s.Eval(t.Context(), pipe, []string{"k"}, "none")
	_, _ = pipe.Exec(t.Context())
	wantAt(t, s.Locate(cmd).Err(), "part2.lua:3: boom")
	if n, err := s.Locate(ok).Int(); err != nil || n != 42 {
		t.Errorf("second script of the pipeline = %d, %v, want 42", n, err)
	}
}

func TestCommandErrorKeepsItsKind(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	if err := c.Set(t.Context(), "k", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := newParts(t).Run(t.Context(), c, []string{"k"}, "call").Err()
	t.Logf("Run: %v", err)
	wantAt(t, err, "@part2.lua:5.")
	if !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Errorf("error = %q, want a WRONGTYPE redis.Error", err)
	}
}

func TestNilStaysNil(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	if err := newParts(t).Run(t.Context(), c, []string{"k"}, "nil").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("Run returning nil: error = %v, want redis.Nil", err)
	}
}

// TestDeniedCommandStaysDenied runs a script calling a command its user
// is not granted: the located error is still classified as denied by
// rediserr (which the core wraps with dlock.ErrDenied).
func TestDeniedCommandStaysDenied(t *testing.T) {
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Users: []string{"scripter on >secret ~* +@all -hget"}})
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Username: "scripter", Password: "secret"})
	t.Cleanup(func() { _ = c.Close() })
	err := newParts(t).Run(t.Context(), c, []string{"k"}, "call").Err()
	t.Logf("Run: %v", err)
	wantAt(t, err, "@part2.lua:5.")
	if k := rediserr.Classify(err); k != driver.ErrorDenied {
		t.Errorf("rediserr.Classify(%q) = %v, want %v", err, k, driver.ErrorDenied)
	}
}

func TestSyntaxErrorNamesPart(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	fsys := fstest.MapFS{
		"part1.lua": {Data: []byte("local a = 1\nlocal b = 2\n")},
		"part2.lua": {Data: []byte("local c = 3\nlocal d = = 4\n")},
	}
	s, err := luascript.New(fsys, nil, "part1.lua", "part2.lua")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	err = s.Run(t.Context(), c, nil).Err()
	t.Logf("Run: %v", err)
	wantAt(t, err, "part2.lua:2:")
	wantAt(t, s.Load(t.Context(), c), "part2.lua:2:")
}

// TestUnclosedNamesBothParts: Lua's message names the line of the
// function left open, in the first part, and the end of the source, the
// line after the second part's last.
func TestUnclosedNamesBothParts(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	fsys := fstest.MapFS{
		"part1.lua": {Data: []byte("local a = 1\nlocal function f()\n  a = 2\n")},
		"part2.lua": {Data: []byte("local b = 2\nreturn b\n")},
	}
	s, err := luascript.New(fsys, nil, "part1.lua", "part2.lua")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	err = s.Load(t.Context(), c)
	t.Logf("Load: %v", err)
	wantAt(t, err, "part2.lua:3: 'end' expected (to close 'function' at part1.lua:2) near '<eof>'")
}
