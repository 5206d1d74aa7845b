// Package redisquiet keeps go-redis from writing to standard error about
// the clients that dlock.Open makes (redislock's and redlock's).
package redisquiet

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger (redis.SetLogger) and has
// no per-client setting. So that the clients dlock.Open makes never write
// to the program's standard error (dlock's library code does not log),
// this package installs, when it is initialised, a logger that drops the
// messages about those clients and prints every other one exactly as
// go-redis's default logger does. Open's clients carry Hook, which
// marks the contexts of their commands and the errors of their dials (the
// pool dials with a context of its own, and logs the error); messages
// go-redis logs with neither are not told apart and still print.
//
// A program that sets its own go-redis logger (in main, or in the init of
// a package that imports this one) replaces this one, and then decides
// for dlock's clients too.
func init() { redis.SetLogger(quietLogger{defaultLog}) }

// defaultLog prints as go-redis's default logger does.
var defaultLog = log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)

type quietKey struct{}

// Context marks ctx: go-redis messages logged with it are dropped. Use
// it for a connection go-redis holds on to, such as a PubSub's.
func Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, quietKey{}, true)
}

type quietLogger struct{ out *log.Logger }

func (l quietLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx != nil && ctx.Value(quietKey{}) != nil {
		return
	}
	for _, a := range v {
		var q quietError
		if err, ok := a.(error); ok && errors.As(err, &q) {
			return
		}
	}
	// Frames: Output, this Printf, go-redis's forwarding Printf, its
	// caller (go-redis's default logger reports the same one).
	_ = l.out.Output(3, fmt.Sprintf(format, v...))
}

// quietError is a dial error of a client made by Open: it reads and
// unwraps as the error it holds.
type quietError struct{ error }

func (e quietError) Unwrap() error { return e.error }

// Hook marks every command, pipeline and dial of a client made by Open,
// so that the logger drops what go-redis logs about them.
type Hook struct{}

func (Hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(Context(ctx), network, addr)
		if err != nil {
			err = quietError{err}
		}
		return c, err
	}
}

func (Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return next(Context(ctx), cmd)
	}
}

func (Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return next(Context(ctx), cmds)
	}
}
