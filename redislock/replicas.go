package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
func (w *replicaWait) check(acks *redis.Cmd) error {
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
func runScripts(ctx context.Context, c redis.UniversalClient, w *replicaWait, calls []*scriptCall) {
	waits := false
	for _, call := range calls {
		waits = waits || call.wait
	}
	cc, cluster := c.(*redis.ClusterClient)
	if w == nil || !waits || !cluster {
		runPipelines(ctx, c, w, calls)
		return
	}
	groups := make(map[*redis.Client][]*scriptCall)
	for _, call := range calls {
		node, err := cc.MasterForKey(ctx, call.keys[0])
		if err != nil {
			call.cmd = redis.NewCmd(call.ctx)
			call.cmd.SetErr(err)
			continue
		}
		groups[node] = append(groups[node], call)
	}
	moved := false
	for node, g := range groups {
		runPipelines(ctx, node, w, g)
		for _, call := range g {
			moved = moved || isRedirect(call.cmd.Err())
		}
	}
	if moved {
		// A node client does not follow MOVED: let the cluster client
		// learn the new slot map for the next call.
		cc.ReloadState(ctx)
	}
}

// runPipelines is runScripts on one connection's worth of calls.
func runPipelines(ctx context.Context, c redis.Cmdable, w *replicaWait, calls []*scriptCall) {
	pipe := func(eval bool) {
		p := c.Pipeline()
		var timeout time.Duration
		var acks *redis.Cmd
		var sent []*scriptCall
		for _, call := range calls {
			if call.cmd != nil && !isNoScript(call.cmd.Err()) {
				continue
			}
			if eval {
				call.cmd = call.script.Eval(call.ctx, p, call.keys, call.args...)
			} else {
				call.cmd = call.script.EvalSha(call.ctx, p, call.keys, call.args...)
			}
			sent = append(sent, call)
			if w != nil && call.wait {
				t := w.waitTimeout(call.ttl)
				if timeout == 0 || t < timeout {
					timeout = t
				}
			}
		}
		if timeout > 0 {
			acks = p.Do(ctx, "wait", w.replicas, max(timeout.Milliseconds(), 1))
		}
		for _, call := range sent {
			call.acks = acks
		}
		p.Exec(ctx) // each command carries its own outcome
		for _, call := range sent {
			call.script.Locate(call.cmd)
		}
	}
	pipe(false)
	for _, call := range calls {
		if isNoScript(call.cmd.Err()) {
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
