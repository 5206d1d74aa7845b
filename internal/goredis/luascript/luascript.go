// Package luascript assembles the Lua scripts of redislock and redlock
// from .lua files (embedded with //go:embed) and runs them through
// go-redis, so that a script's error names the file and line it comes
// from instead of a line of the concatenation the server saw.
//
// A script is the concatenation of its parts, in order. A part may hold
// placeholders, {{name}}, that New replaces with values given in Go (the
// constants a script shares with its Go caller); a value holds no
// newline, so the parts' lines stay where they are. "{{" appears in no
// part otherwise.
package luascript

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrSource is wrapped by New's error for parts that cannot be assembled:
// a file missing, a placeholder without a value, a value no part uses.
var ErrSource = errors.New("luascript: bad script source")

// Script is a script assembled from parts, ready to run. Its methods are
// those of redis.Script, with a script's error mapped to its part (see
// Locate).
type Script struct {
	script *redis.Script
	src    string
	parts  []part
}

// part is one file of a script: its name and the line of the assembled
// source its first line is.
type part struct {
	name  string
	first int
}

// placeholder matches a placeholder; the name is its first group.
var placeholder = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)

// New assembles the files of fsys, in order, into one script, with each
// placeholder {{name}} replaced by vars[name]. It fails if a file cannot
// be read, a placeholder has no value, a value is unused or holds a
// newline, or "{{" is left in the source. A nil vars means none.
func New(fsys fs.FS, vars map[string]string, files ...string) (*Script, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no files", ErrSource)
	}
	used := make(map[string]bool)
	var src strings.Builder
	s := &Script{}
	line := 1
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		text, err := fill(name, string(b), vars, used)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		s.parts = append(s.parts, part{name: name, first: line})
		line += strings.Count(text, "\n")
		src.WriteString(text)
	}
	for name := range vars {
		if !used[name] {
			return nil, fmt.Errorf("%w: value of {{%s}} used by none of %s", ErrSource, name, strings.Join(files, ", "))
		}
	}
	s.src = src.String()
	s.script = redis.NewScript(s.src)
	return s, nil
}

// fill replaces the placeholders of the part name, whose text is text,
// with their values in vars, and marks the names it used.
func fill(name, text string, vars map[string]string, used map[string]bool) (string, error) {
	var err error
	text = placeholder.ReplaceAllStringFunc(text, func(m string) string {
		key := m[2 : len(m)-2]
		v, ok := vars[key]
		switch {
		case err != nil:
		case !ok:
			err = fmt.Errorf("%w: %s: placeholder %s has no value", ErrSource, name, m)
		case strings.ContainsAny(v, "\r\n"):
			err = fmt.Errorf("%w: %s: value of %s holds a newline", ErrSource, name, m)
		}
		used[key] = true
		return v
	})
	if err != nil {
		return "", err
	}
	if i := strings.Index(text, "{{"); i >= 0 {
		return "", fmt.Errorf("%w: %s:%d: %q is not a placeholder", ErrSource, name, 1+strings.Count(text[:i], "\n"), "{{")
	}
	return text, nil
}

// Must returns s, and panics if err is not nil. It is for scripts built
// from embedded files in a package variable's initialization, where an
// error is a mistake in the files, found by the first test that loads the
// package.
func Must(s *Script, err error) *Script {
	if err != nil {
		panic(err)
	}
	return s
}

// Source returns the assembled source the server runs.
func (s *Script) Source() string { return s.src }

// Files returns the names of the script's parts, in order.
func (s *Script) Files() []string {
	names := make([]string, len(s.parts))
	for i, p := range s.parts {
		names[i] = p.name
	}
	return names
}

// Hash returns the SHA-1 of the source, as EVALSHA names it.
func (s *Script) Hash() string { return s.script.Hash() }

// Run runs the script with EVALSHA, and with EVAL if the server has not
// cached it. Its error, if any, is located (see Locate).
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Locate(s.script.Run(ctx, c, keys, args...))
}

// Eval sends the script with EVAL. On a pipeline, call Locate on the
// command once the pipeline has run.
func (s *Script) Eval(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Locate(s.script.Eval(ctx, c, keys, args...))
}

// EvalSha runs the script with EVALSHA. On a pipeline, call Locate on the
// command once the pipeline has run.
func (s *Script) EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Locate(s.script.EvalSha(ctx, c, keys, args...))
}

// Load loads the script into the server's cache with SCRIPT LOAD; a
// script that does not compile fails with its error located.
func (s *Script) Load(ctx context.Context, c redis.Scripter) error {
	return s.locate(s.script.Load(ctx, c).Err())
}

// Locate rewrites cmd's error, if it names lines of the assembled source
// ("user_script:N", and "at line N" in a compiler's message), to name the
// part and its line instead ("acquire.lua:M"), and returns cmd. The error
// keeps the server's error in its chain (errors.Is and errors.As see it),
// and only the line references of its text change. A command not yet run
// (queued on a pipeline) is left alone.
func (s *Script) Locate(cmd *redis.Cmd) *redis.Cmd {
	if err := cmd.Err(); err != nil {
		if l := s.locate(err); l != err {
			cmd.SetErr(l)
		}
	}
	return cmd
}
