package redislock

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

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
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redislock: inspect: %w", err)
	}
	var hs []driver.Holder
	for i, k := range keys {
		h, ok := parseHolder(k, gets[i].Val())
		if !ok {
			continue
		}
		h.Remaining = max(ttls[i].Val(), 0)
		hs = append(hs, h)
	}
	return hs, nil
}

// parseHolder decodes a held lock key's value; tombstones and foreign
// values are not holders.
func parseHolder(key, v string) (driver.Holder, bool) {
	owner, rest, ok := strings.Cut(v, "|")
	if !ok || owner == "" {
		return driver.Holder{}, false
	}
	fenceText, meta, _ := strings.Cut(rest, "|")
	fence, err := strconv.ParseUint(fenceText, 10, 64)
	if err != nil {
		return driver.Holder{}, false
	}
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

// ForceRelease frees name whatever its owner, keeping its fencing token,
// and wakes its waiters.
func (d *redisDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	n, err := forceReleaseScript.Run(ctx, d.c, d.keys(name), ms(tombstoneTTL), d.channelPrefix()).Int64()
	if err != nil {
		return false, fmt.Errorf("redislock: force release %q: %w", name, err)
	}
	return n == 1, nil
}
