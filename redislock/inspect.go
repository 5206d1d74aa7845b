package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
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
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]redisconn.Cmd, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, redisconn.Cmd{Name: []string{"get"}, Keys: []string{k}}, redisconn.Cmd{Name: []string{"pttl"}, Keys: []string{k}})
	}
	replies := d.c.Pipeline(ctx, cmds) // errors are read per command below
	var (
		hs     []driver.Holder
		hashes []string // keys held in shared mode or as a semaphore
	)
	for i, k := range keys {
		get, ttl := replies[2*i], replies[2*i+1]
		switch err := get.Err; {
		case errors.Is(err, redisconn.ErrNil):
			continue
		case isWrongType(err):
			hashes = append(hashes, k)
			continue
		case err != nil:
			return nil, fmt.Errorf("redislock: inspect: %w", err)
		}
		v, _ := get.Val.(string)
		h, ok := parseHolder(k, v)
		if !ok {
			continue
		}
		// PTTL is -1 or -2 when the key has no expiry or is gone.
		pttl, _ := ttl.Int64()
		h.Remaining = max(time.Duration(pttl)*time.Millisecond-d.bound, 0) // the key outlives the lease by the clock bound
		delayed(&h)
		hs = append(hs, h)
	}
	if len(hashes) == 0 {
		return hs, nil
	}
	// A hash may have turned back into a string meanwhile (its last holder
	// left): the script reads whichever the key is now.
	cmds = cmds[:0]
	for _, k := range hashes {
		cmds = append(cmds, inspectHashScript.Cmd(true, []string{k}, nil)) // EVAL: a pipeline cannot fall back from EVALSHA
	}
	replies = d.c.Pipeline(ctx, cmds)
	for i, k := range hashes {
		replies[i].Err = inspectHashScript.LocateError(replies[i].Err)
		vals, err := replies[i].Slice()
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
	masters, err := d.c.Masters(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	seen := make(map[string]bool) // a Conn's Masters may include replicas
	for _, c := range masters {
		found, err := redisconn.Scan(ctx, c, pattern)
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func escapeGlob(s string) string { return globEscaper.Replace(s) }

// Waiters implements driver.WaiterCounter: the live entries of each
// name's queue (its holders are never in it), one script per name, all in
// one pipeline (on a Cluster, one per master node), plus this Locker's
// waiters that wait in its line without an entry (see lines). Another
// Locker's line counts as its one entry.
func (d *redisDriver) Waiters(ctx context.Context, names []string) ([]int, error) {
	cmds := make([]redisconn.Cmd, len(names))
	for i, n := range names {
		cmds[i] = waitersScript.Cmd(true, []string{d.keys(n)[1]}, nil) // EVAL: a pipeline cannot fall back from EVALSHA
	}
	replies := d.c.Pipeline(ctx, cmds) // errors are read per command below
	counts := make([]int, len(names))
	for i, r := range replies {
		r.Err = waitersScript.LocateError(r.Err)
		n, err := r.Int64()
		if err != nil {
			return nil, fmt.Errorf("redislock: waiters %q: %w", names[i], err)
		}
		counts[i] = int(n) + d.lines.passive(names[i])
	}
	return counts, nil
}

// ForceRelease frees name whatever its owner, keeping its fencing token,
// and wakes its waiters.
func (d *redisDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	n, err := forceReleaseScript.Exec(ctx, d.c, d.keys(name), ms(d.tombstone()), d.channelPrefix(), ms(d.bound)).Int64()
	if err != nil {
		return false, fmt.Errorf("redislock: force release %q: %w", name, err)
	}
	return n == 1, nil
}
