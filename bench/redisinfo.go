package main

import (
	"context"
	"fmt"
	"log"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// parseInfo parses the reply of INFO into its key:value fields.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// cmdStats is a snapshot of INFO commandstats: calls per command.
type cmdStats map[string]int64

func readCmdStats(ctx context.Context, c *redis.Client) (cmdStats, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("info commandstats: %w", err)
	}
	st := make(cmdStats)
	for k, v := range parseInfo(s) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				st[name], _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	return st, nil
}

// connectionSetup are the commands go-redis sends when it opens a
// connection: a cost per connection, not per lock operation.
var connectionSetup = map[string]bool{"hello": true, "client|setinfo": true, "client": true, "auth": true, "select": true}

// delta returns the calls made between before and after, per command,
// without connection setup. INFO is not counted either: readCmdStats is
// its only caller, and no library under test sends it.
func (after cmdStats) delta(before cmdStats) cmdStats {
	return after.sub(before, true)
}

// sub returns after minus before, per name; with server set, it leaves
// out INFO and connection setup.
func (after cmdStats) sub(before cmdStats, server bool) cmdStats {
	d := make(cmdStats)
	for k, v := range after {
		if server && (connectionSetup[k] || k == "info") {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func (d cmdStats) total() int64 {
	var n int64
	for _, v := range d {
		n += v
	}
	return n
}

// pubsubCalls counts the subscription commands in d. They do not go
// through go-redis hooks, so roundTrips adds them from the server's side.
func (d cmdStats) pubsubCalls() int64 {
	var n int64
	for _, k := range []string{"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"} {
		n += d[k]
	}
	return n
}

// top returns the commands of d by calls, largest first, as "cmd=n".
func (d cmdStats) top(k int) string {
	if k <= 0 {
		k = len(d)
	}
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for c, n := range d {
		all = append(all, kv{c, n})
	}
	for i := range all { // small: insertion sort
		for j := i; j > 0 && (all[j].v > all[j-1].v || all[j].v == all[j-1].v && all[j].k < all[j-1].k); j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	var parts []string
	for i, e := range all {
		if i == k {
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%d", e.k, e.v))
	}
	return strings.Join(parts, " ")
}

func usedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("info memory: %w", err)
	}
	return strconv.ParseInt(parseInfo(s)["used_memory"], 10, 64)
}

// clientsMemory returns the sum of every client connection's memory
// (CLIENT LIST tot-mem: its query and output buffers and state), which
// used_memory includes.
func clientsMemory(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.ClientList(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("client list: %w", err)
	}
	var sum int64
	for f := range strings.FieldsSeq(s) {
		if v, ok := strings.CutPrefix(f, "tot-mem="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("client list: tot-mem=%q: %w", v, err)
			}
			sum += n
		}
	}
	return sum, nil
}

// tripCounter is a go-redis hook that counts requests sent to the server:
// one per command and one per pipeline (a pipeline is one round trip), in
// all and by command name ("evalsha:" + the script's SHA1 prefix for
// EVALSHA, "pipeline" for a pipeline). Connection setup is not counted.
type tripCounter struct {
	n  atomic.Int64
	mu sync.Mutex
	by map[string]int64
}

func (t *tripCounter) count(name string) {
	t.n.Add(1)
	t.mu.Lock()
	if t.by == nil {
		t.by = make(map[string]int64)
	}
	t.by[name]++
	t.mu.Unlock()
}

// snapshot returns the counts by name so far.
func (t *tripCounter) snapshot() cmdStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(cmdStats(t.by))
}

func (t *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if args := cmd.Args(); name == "evalsha" && len(args) > 1 {
			if sha, ok := args[1].(string); ok && len(sha) >= 8 {
				name += ":" + sha[:8]
			}
		}
		if connectionSetup[cmd.Name()] {
			return next(ctx, cmd)
		}
		t.count(name)
		return next(ctx, cmd)
	}
}

func (t *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		setup := true
		for _, c := range cmds {
			setup = setup && connectionSetup[c.Name()]
		}
		if !setup {
			t.count("pipeline")
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*tripCounter)(nil)

// trips counts this process's requests to Redis from every client the
// benchmark makes.
var trips tripCounter

// newClient returns a go-redis client with default options, counted by
// trips. An address that ends in noRetries makes a client that neither
// retries a failed command (MaxRetries -1, instead of 3 with a backoff of
// 8 to 512 ms) nor a failed dial (DialerRetries 1, instead of 5 dials
// 100 ms apart).
func newClient(addr string) *redis.Client {
	o := &redis.Options{Addr: addr}
	if a, ok := strings.CutSuffix(addr, noRetries); ok {
		o.Addr, o.MaxRetries, o.DialerRetries = a, -1, 1
	}
	c := redis.NewClient(o)
	c.AddHook(&trips)
	return c
}

// noRetries, at the end of an address given to newClient, turns go-redis's
// retries off.
const noRetries = "#no-retries"

// quietDials is go-redis's logger without its messages about failed dials
// (the Redlock section's killed masters make one per request).
type quietDials struct{}

func (quietDials) Printf(ctx context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "failed to dial") {
		return
	}
	log.Print(msg)
}

// serverCPU returns the CPU time redis-server has used (user + system).
func serverCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	m := parseInfo(s)
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(m[k], 64)
		if err != nil {
			return 0, fmt.Errorf("info cpu: %s: %w", k, err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), nil
}

// selfCPU returns the CPU time this process has used (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
