package luascript

import (
	"regexp"
	"strconv"
	"strings"
)

// scriptLine matches a line reference of Redis to a script's source:
// "user_script:N" (Redis 7 prints it in the message and again as
// "on @user_script:N."; Redis 6 as "@user_script:N: user_script:N:").
var scriptLine = regexp.MustCompile(`user_script:(\d+)`)

// luaLine matches Lua's own reference to a line of the same source in a
// compiler error: "'end' expected (to close 'function' at line N)".
var luaLine = regexp.MustCompile(`at line (\d+)\)`)

// locatedError is a script's error from the server with its lines named
// by part. Its chain holds the server's error.
type locatedError struct {
	msg string
	err error
}

func (e *locatedError) Error() string { return e.msg }
func (e *locatedError) Unwrap() error { return e.err }

// locate returns err with its line references mapped to parts, or err
// itself if it holds none.
func (s *Script) locate(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, "user_script:") {
		return err
	}
	msg = scriptLine.ReplaceAllStringFunc(msg, func(m string) string {
		return s.position(m[len("user_script:"):])
	})
	msg = luaLine.ReplaceAllStringFunc(msg, func(m string) string {
		return "at " + s.position(m[len("at line "):len(m)-1]) + ")"
	})
	return &locatedError{msg: msg, err: err}
}

// position returns "name:M" for line n (decimal) of the assembled source:
// line M of the part that holds it.
func (s *Script) position(n string) string {
	line, err := strconv.Atoi(n)
	if err != nil || line < 1 {
		return "user_script:" + n
	}
	p := s.parts[0]
	for _, q := range s.parts[1:] {
		if q.first > line {
			break
		}
		p = q
	}
	return p.name + ":" + strconv.Itoa(line-p.first+1)
}
