package redislock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher coalesces the script calls of a Locker's concurrent Acquire and
// Release calls into pipelines. A call that finds fewer than maxInFlight
// round trips under way runs at once, alone, so an uncontended call pays
// nothing; calls that arrive meanwhile queue up, and whoever finishes a
// round trip sends everything queued as one pipeline before it returns.
// Under load each round trip carries many calls, which saves system calls
// on both sides: more locks per second from the same Redis.
type batcher struct {
	c           redis.UniversalClient
	maxInFlight int

	mu       sync.Mutex
	inFlight int
	queue    []*scriptCall
}

// scriptCall is one script run: its outcome is in cmd once done is closed.
type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// maxInFlight bounds the round trips one Locker keeps under way at once;
// beyond it, calls wait to join the next pipeline.
const maxInFlight = 4

func newBatcher(c redis.UniversalClient) *batcher {
	return &batcher{c: c, maxInFlight: maxInFlight}
}

// run runs script and returns its command, once the reply (or an error)
// is in. It does not watch ctx while waiting to be sent: the core does.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	b.mu.Lock()
	if b.inFlight >= b.maxInFlight {
		call := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
		b.queue = append(b.queue, call)
		b.mu.Unlock()
		<-call.done
		return call.cmd
	}
	b.inFlight++
	b.mu.Unlock()
	cmd := script.Run(ctx, b.c, keys, args...)
	b.drain()
	return cmd
}

// drain sends what queued while this caller's round trip was under way,
// as pipelines, until nothing is queued; then it gives up its slot.
func (b *batcher) drain() {
	for {
		b.mu.Lock()
		calls := b.queue
		b.queue = nil
		if len(calls) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(calls)
	}
}

// send runs calls as one pipeline of EVALSHA, and again with EVAL for
// those the server had no script for.
func (b *batcher) send(calls []*scriptCall) {
	pipe := func(eval bool) {
		p := b.c.Pipeline()
		for _, c := range calls {
			if c.cmd != nil && !isNoScript(c.cmd.Err()) {
				continue
			}
			if eval {
				c.cmd = c.script.Eval(c.ctx, p, c.keys, c.args...)
			} else {
				c.cmd = c.script.EvalSha(c.ctx, p, c.keys, c.args...)
			}
		}
		p.Exec(context.Background()) // each command carries its own outcome
	}
	pipe(false)
	for _, c := range calls {
		if isNoScript(c.cmd.Err()) {
			pipe(true)
			break
		}
	}
	for _, c := range calls {
		close(c.done)
	}
}
