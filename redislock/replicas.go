package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// ErrNotReplicated is wrapped by the error of an acquisition or a refresh
// whose write fewer than Options.WaitReplicas replicas acknowledged
// within the wait's bound. A refresh with this error has an unknown
// outcome (the master holds the lease; a failover may lose it), not
// dlock.ErrNotHeld.
var ErrNotReplicated = errors.New("redislock: too few replicas acknowledged the write")

// maxDefaultWaitTimeout bounds Options.WaitTimeout's default.
const maxDefaultWaitTimeout = time.Second

// replicaWait is the WAIT a Locker sends after each step that writes a
// lease, nil when Options.WaitReplicas is 0.
type replicaWait struct {
	replicas int
	timeout  time.Duration // 0: from the lease's TTL (waitTimeout)
}

// waitTimeout is the bound of a WAIT after writing a lease of ttl.
func (w *replicaWait) waitTimeout(ttl time.Duration) time.Duration {
	if w.timeout > 0 {
		return w.timeout
	}
	// WAIT's timeout is in milliseconds, and 0 would block for ever.
	return max(min(ttl/10, maxDefaultWaitTimeout), time.Millisecond)
}

// check returns an error wrapping ErrNotReplicated if the WAIT that
// followed a call's script counted fewer than w.replicas replicas.
func (w *replicaWait) check(acks *redisconn.Reply) error {
	if acks == nil {
		return fmt.Errorf("no WAIT was sent: %w", ErrNotReplicated)
	}
	n, err := acks.Int64()
	if err != nil {
		return fmt.Errorf("WAIT: %w: %w", err, ErrNotReplicated)
	}
	if int(n) < w.replicas {
		return fmt.Errorf("%d of %d replicas within the wait's bound: %w", n, w.replicas, ErrNotReplicated)
	}
	return nil
}

// runScripts runs calls as pipelines of EVALSHA, and again with EVAL for
// those the server had no script for. If w is set and a call in a
// pipeline has wait set, the pipeline ends with WAIT, which counts the
// replicas that acknowledged every write made so far on the pipeline's
// connection; each such call's acks is the WAIT of the pipeline its
// script ran in. WAIT goes to the connection that ran the scripts: on a
// Cluster, whose pipelines split by slot and send a keyless command to
// any node, the calls are grouped by their key's master and each group
// runs on that node's own client.
func runScripts(ctx context.Context, c redisconn.Conn, w *replicaWait, calls []*scriptCall) {
	waits := false
	for _, call := range calls {
		waits = waits || call.wait
	}
	router, cluster := c.(redisconn.KeyRouter)
	if w == nil || !waits || !cluster || !redisconn.IsCluster(c) {
		runPipelines(ctx, c, w, calls)
		return
	}
	var nodes []redisconn.Conn
	groups := make(map[redisconn.Conn][]*scriptCall)
	for _, call := range calls {
		node, err := router.MasterFor(ctx, call.keys[0])
		if err != nil {
			call.reply, call.sent = redisconn.Reply{Err: err}, true
			continue
		}
		if groups[node] == nil {
			nodes = append(nodes, node)
		}
		groups[node] = append(groups[node], call)
	}
	moved := false
	for _, node := range nodes {
		runPipelines(ctx, node, w, groups[node])
		for _, call := range groups[node] {
			moved = moved || isRedirect(call.reply.Err)
		}
	}
	if moved {
		// A node client does not follow MOVED: let the cluster client
		// learn the new slot map for the next call.
		router.Reload(ctx)
	}
}

// runPipelines is runScripts on one connection's worth of calls.
func runPipelines(ctx context.Context, c redisconn.Conn, w *replicaWait, calls []*scriptCall) {
	pipe := func(eval bool) {
		var timeout time.Duration
		var cmds []redisconn.Cmd
		var sent []*scriptCall
		for _, call := range calls {
			if call.sent && !luascript.IsNoScript(call.reply.Err) {
				continue
			}
			cmds = append(cmds, call.script.Cmd(eval, call.keys, redisconn.Args(call.args...)))
			sent = append(sent, call)
			if w != nil && call.wait {
				t := w.waitTimeout(call.ttl)
				if timeout == 0 || t < timeout {
					timeout = t
				}
			}
		}
		if timeout > 0 {
			cmds = append(cmds, redisconn.Cmd{Name: redisconn.Args("wait", w.replicas, max(timeout.Milliseconds(), 1))})
		}
		replies := c.Pipeline(ctx, cmds)
		var acks *redisconn.Reply
		if timeout > 0 {
			acks = &replies[len(sent)]
		}
		for i, call := range sent {
			call.reply, call.sent, call.acks = replies[i], true, acks
			call.reply.Err = call.script.LocateError(call.reply.Err)
		}
	}
	pipe(false)
	for _, call := range calls {
		if luascript.IsNoScript(call.reply.Err) {
			pipe(true) // the server lost its script cache (restart, failover)
			break
		}
	}
}

// isRedirect reports whether err is a Cluster redirection or a refusal
// while the cluster reconfigures.
func isRedirect(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range []string{"MOVED ", "ASK ", "CLUSTERDOWN", "TRYAGAIN"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}
