package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// batcher coalesces the script calls of a Locker's concurrent Acquire and
// Release calls into pipelines. A call that finds fewer than maxInFlight
// round trips under way runs at once, alone, so an uncontended call pays
// nothing; calls that arrive meanwhile queue up, and whoever finishes a
// round trip sends everything queued as one pipeline before it returns.
// Under load each round trip carries many calls, which saves system calls
// on both sides: more locks per second from the same Redis.
type batcher struct {
	c           redisconn.Conn
	w           *replicaWait // nil: no WAIT after writes
	maxInFlight int

	mu       sync.Mutex
	inFlight int
	queue    []*scriptCall
}

// scriptCall is one script run: its outcome is in reply (and, if it
// waits for replicas, the WAIT's in acks) once done is closed.
type scriptCall struct {
	ctx    context.Context
	script *luascript.Script
	keys   []string
	args   []any
	wait   bool          // follow the script with WAIT (if the batcher waits)
	ttl    time.Duration // the lease's, for WAIT's default bound
	sent   bool          // reply holds the outcome of a send
	reply  redisconn.Reply
	acks   *redisconn.Reply // the WAIT after the script, nil if none
	done   chan struct{}
}

// maxInFlight bounds the round trips one Locker keeps under way at once;
// beyond it, calls wait to join the next pipeline.
const maxInFlight = 4

func newBatcher(c redisconn.Conn, w *replicaWait) *batcher {
	return &batcher{c: c, w: w, maxInFlight: maxInFlight}
}

// run runs call's script and returns once its reply (or an error) is in
// call.reply. It does not watch ctx while waiting to be sent: the core does.
func (b *batcher) run(call *scriptCall) *scriptCall {
	b.mu.Lock()
	if b.inFlight >= b.maxInFlight {
		call.done = make(chan struct{})
		b.queue = append(b.queue, call)
		b.mu.Unlock()
		<-call.done
		return call
	}
	b.inFlight++
	b.mu.Unlock()
	if b.w != nil && call.wait {
		runScripts(call.ctx, b.c, b.w, []*scriptCall{call})
	} else {
		call.reply, call.sent = call.script.Exec(call.ctx, b.c, call.keys, call.args...), true
	}
	b.drain()
	return call
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
		runScripts(context.Background(), b.c, b.w, calls)
		for _, c := range calls {
			close(c.done)
		}
	}
}
