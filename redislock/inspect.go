package redislock

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Inspect reads the named locks' keys, or scans for every lock key under
// the prefix (on every master of a Cluster) when names is empty.
func (d *redisDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	var keys []string
	if len(names) == 0 {
		var err error
		if keys, err = d.scan(ctx); err != nil {
			return nil, fmt.Errorf("redislock: inspect: %w", err)
		}
	}
	for _, n := range names {
		keys = append(keys, Key(d.prefix, n))
	}
	pipe := d.c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	pipe.Exec(ctx) // errors are read per command below
	var (
		hs     []driver.Holder
		hashes []string // keys held in shared mode or as a semaphore
	)
	for i, k := range keys {
		switch err := gets[i].Err(); {
		case err == redis.Nil:
			continue
		case isWrongType(err):
			hashes = append(hashes, k)
			continue
		case err != nil:
			return nil, fmt.Errorf("redislock: inspect: %w", err)
		}
		h, ok := parseHolder(k, gets[i].Val())
		if !ok {
			continue
		}
		h.Remaining = max(ttls[i].Val()-d.bound, 0) // the key outlives the lease by the clock bound
		delayed(&h)
		hs = append(hs, h)
	}
	if len(hashes) == 0 {
		return hs, nil
	}
	// A hash may have turned back into a string meanwhile (its last holder
	// left): the script reads whichever the key is now.
	pipe = d.c.Pipeline()
	reads := make([]*redis.Cmd, len(hashes))
	for i, k := range hashes {
		reads[i] = inspectHashScript.Eval(ctx, pipe, []string{k}) // Eval: a pipeline cannot fall back from EVALSHA
	}
	pipe.Exec(ctx)
	for i, k := range hashes {
		vals, err := inspectHashScript.Locate(reads[i]).Slice()
		if err != nil {
			return nil, fmt.Errorf("redislock: inspect: %w", err)
		}
		if len(vals) == 3 {
			v, _ := vals[1].(string)
			if h, ok := parseHolder(k, v); ok {
				ttl, _ := vals[2].(int64)
				h.Remaining = max(time.Duration(ttl)*time.Millisecond-d.bound, 0)
				delayed(&h)
				hs = append(hs, h)
			}
			continue
		}
		hs = append(hs, parseHolders(k, vals, d.bound)...)
	}
	return hs, nil
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// parseHolders decodes inspectHashScript's reply on the hash of a name
// held in shared mode or as a semaphore (see lua/common.lua): its live
// holders (those whose lease ended less than bound ago by the server's
// clock, which the scripts count as live, with Remaining 0), in fence
// order.
func parseHolders(key string, vals []any, bound time.Duration) []driver.Holder {
	name, ok := nameOf(key)
	if len(vals) != 2 || !ok {
		return nil
	}
	now, _ := vals[0].(int64)
	fields, _ := vals[1].([]any)
	var mode string
	for i := 0; i+1 < len(fields); i += 2 {
		if f, _ := fields[i].(string); f == "m" {
			mode, _ = fields[i+1].(string)
		}
	}
	limit, _ := strconv.Atoi(mode)
	var hs []driver.Holder
	for i := 0; i+1 < len(fields); i += 2 {
		owner, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		parts := strings.SplitN(v, "|", 3)
		if owner == "f" || owner == "m" || len(parts) != 3 {
			continue
		}
		exp, err1 := strconv.ParseInt(parts[0], 10, 64)
		fence, err2 := strconv.ParseUint(parts[1], 10, 64)
		if err1 != nil || err2 != nil || exp+bound.Milliseconds() <= now {
			continue
		}
		h := driver.Holder{Name: name, Owner: owner, Fence: fence, Metadata: parts[2],
			Remaining: time.Duration(max(exp-now, 0)) * time.Millisecond, Shared: mode == "s", Limit: limit}
		delayed(&h)
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	return hs
}

// parseHolder decodes a held lock key's value; tombstones and foreign
// values are not holders.
func parseHolder(key, v string) (driver.Holder, bool) {
	owner, fence, rest, ok := parseValue(v)
	if !ok || owner == "" {
		return driver.Holder{}, false
	}
	_, meta, _ := strings.Cut(rest, "|") // after how long the queue lives (",qexp", see lua/common.lua)
	name, ok := nameOf(key)
	if !ok {
		return driver.Holder{}, false
	}
	return driver.Holder{Name: name, Owner: owner, Fence: fence, Metadata: meta}, true
}

// nameOf inverts Key: the unescaped text between the braces.
func nameOf(key string) (string, bool) {
	i, j := strings.IndexByte(key, '{'), strings.LastIndexByte(key, '}')
	if i < 0 || j < i {
		return "", false
	}
	name, err := url.PathUnescape(key[i+1 : j])
	return name, err == nil
}

func (d *redisDriver) scan(ctx context.Context) ([]string, error) {
	pattern := escapeGlob(d.prefix) + "{*}"
	var (
		mu   sync.Mutex
		keys []string
	)
	scanOne := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := d.c.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scanOne(ctx, c) })
		return keys, err
	}
	return keys, scanOne(ctx, d.c)
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func escapeGlob(s string) string { return globEscaper.Replace(s) }

// Waiters implements driver.WaiterCounter: the live entries of each
// name's queue (its holders are never in it), one script per name, all in
// one pipeline (on a Cluster, one per master node).
func (d *redisDriver) Waiters(ctx context.Context, names []string) ([]int, error) {
	pipe := d.c.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, n := range names {
		cmds[i] = waitersScript.Eval(ctx, pipe, []string{d.keys(n)[1]}) // Eval: a pipeline cannot fall back from EVALSHA
	}
	pipe.Exec(ctx) // errors are read per command below
	counts := make([]int, len(names))
	for i, c := range cmds {
		n, err := waitersScript.Locate(c).Int64()
		if err != nil {
			return nil, fmt.Errorf("redislock: waiters %q: %w", names[i], err)
		}
		counts[i] = int(n)
	}
	return counts, nil
}

// ForceRelease frees name whatever its owner, keeping its fencing token,
// and wakes its waiters.
func (d *redisDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	n, err := forceReleaseScript.Run(ctx, d.c, d.keys(name), ms(d.tombstone()), d.channelPrefix(), ms(d.bound)).Int64()
	if err != nil {
		return false, fmt.Errorf("redislock: force release %q: %w", name, err)
	}
	return n == 1, nil
}
