package luascript

import (
	"context"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/internal/redisconn"
)

// Cmd returns the command that runs the script on keys with args: EVAL
// with its source if eval is set, else EVALSHA with its hash.
func (s *Script) Cmd(eval bool, keys, args []string) redisconn.Cmd {
	name := []string{"evalsha", s.Hash(), strconv.Itoa(len(keys))}
	if eval {
		name = []string{"eval", s.src, strconv.Itoa(len(keys))}
	}
	return redisconn.Cmd{Name: name, Keys: keys, Args: args}
}

// Exec runs the script on c with EVALSHA, and with EVAL if the server has
// not cached it. Its error, if any, is located (see LocateError).
func (s *Script) Exec(ctx context.Context, c redisconn.Conn, keys []string, args ...any) redisconn.Reply {
	a := redisconn.Args(args...)
	r := c.Pipeline(ctx, []redisconn.Cmd{s.Cmd(false, keys, a)})[0]
	if IsNoScript(r.Err) {
		r = c.Pipeline(ctx, []redisconn.Cmd{s.Cmd(true, keys, a)})[0]
	}
	r.Err = s.LocateError(r.Err)
	return r
}

// LocateError is Locate on an error: err with its line references
// mapped to the script's parts, or err itself if it holds none.
func (s *Script) LocateError(err error) error { return s.locate(err) }

// IsNoScript reports whether err is the server's answer to an EVALSHA of
// a script it has not cached.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
