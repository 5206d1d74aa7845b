package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/delaymeta"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// inspectTimeout bounds Inspect's and ForceRelease's work on one master.
const inspectTimeout = 10 * time.Second

// seen is a lock key's content on one master.
type seen struct {
	owner, meta string
	fence       uint64
	remaining   time.Duration
}

// Inspect reports, for each name (every name held anywhere when names is
// empty), the owner whose key is on a majority of the masters, with the
// highest token among them and the lease left on a majority.
func (d *rlDriver) Inspect(ctx context.Context, names []string) ([]driver.Holder, error) {
	type answer struct {
		keys map[string]seen // by name
		err  error
	}
	answers := each(ctx, d, inspectTimeout, answer{err: errNoAnswer}, func(ctx context.Context, _ int, c redisconn.Conn) answer {
		keys, err := d.read(ctx, c, names)
		return answer{keys, err}
	}, nil, nil)
	all := map[string][]seen{}
	answered := 0
	var firstErr error
	for _, a := range answers {
		if a.err != nil {
			firstErr = a.err
			continue
		}
		answered++
		for name, s := range a.keys {
			all[name] = append(all[name], s)
		}
	}
	if answered < d.quorum {
		return nil, fmt.Errorf("redlock: inspect: %d of %d masters answered, want %d: %w", answered, len(d.masters), d.quorum, firstErr)
	}
	var hs []driver.Holder
	for name, ss := range all {
		if h, ok := d.holder(name, ss); ok {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// holder returns the owner of name seen on a majority of the masters.
func (d *rlDriver) holder(name string, ss []seen) (driver.Holder, bool) {
	byOwner := map[string][]seen{}
	for _, s := range ss {
		byOwner[s.owner] = append(byOwner[s.owner], s)
	}
	for owner, os := range byOwner {
		if len(os) < d.quorum {
			continue
		}
		h := driver.Holder{Name: name, Owner: owner}
		var rs []time.Duration
		for _, s := range os {
			h.Fence = max(h.Fence, s.fence)
			h.Metadata = s.meta
			rs = append(rs, s.remaining)
		}
		slices.Sort(rs)
		h.Remaining = rs[len(rs)-d.quorum] // the quorum-th longest
		var delay time.Duration
		delay, h.Metadata = delaymeta.Decode(h.Metadata)
		h.Delayed = delay > 0 && h.Remaining <= delay
		return h, h.Fence != 0 // 0: still being acquired
	}
	return driver.Holder{}, false
}

// read returns the lock keys of names on one master (every lock key under
// the prefix when names is empty).
func (d *rlDriver) read(ctx context.Context, c redisconn.Conn, names []string) (map[string]seen, error) {
	if len(names) == 0 {
		lp := d.lockKey("")
		keys, err := redisconn.Scan(ctx, c, globEscaper.Replace(lp)+"*")
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			names = append(names, strings.TrimPrefix(k, lp))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	cmds := make([]redisconn.Cmd, 0, 2*len(names))
	for _, n := range names {
		k := d.lockKey(n)
		cmds = append(cmds, redisconn.Cmd{Name: []string{"get"}, Keys: []string{k}}, redisconn.Cmd{Name: []string{"pttl"}, Keys: []string{k}})
	}
	replies := c.Pipeline(ctx, cmds)
	for _, r := range replies {
		if r.Err != nil && !errors.Is(r.Err, redisconn.ErrNil) {
			return nil, r.Err
		}
	}
	out := map[string]seen{}
	for i, n := range names {
		v, _ := replies[2*i].Val.(string)
		parts := strings.SplitN(v, "|", 3)
		if len(parts) != 3 || parts[0] == "" {
			continue
		}
		f, err := strconv.ParseUint(parts[1], 10, 64)
		if err != nil {
			continue
		}
		owner, _, _ := strings.Cut(parts[0], "#") // the lease's owner, without the attempt (see attemptOwner)
		out[n] = seen{owner: owner, fence: f, meta: parts[2], remaining: pttl(replies[2*i+1])}
	}
	return out, nil
}

// pttl returns a PTTL's reply as a duration, 0 for a key without one
// (-1) or gone (-2).
func pttl(r redisconn.Reply) time.Duration {
	n, _ := r.Int64()
	return max(time.Duration(n)*time.Millisecond, 0)
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// ForceRelease deletes name's key on every master, whatever its owner,
// and wakes its waiters. It reports whether a majority held it.
func (d *rlDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	results := each(ctx, d, inspectTimeout, errNoAnswer, func(ctx context.Context, _ int, c redisconn.Conn) error {
		n, err := forceReleaseScript.Exec(ctx, c, []string{d.lockKey(name)}, d.channel(name)).Int64()
		if err == nil && n != 1 {
			err = driver.ErrNotHeld
		}
		return err
	}, nil, nil)
	deleted, answered := 0, 0
	var firstErr error
	for _, err := range results {
		switch {
		case err == nil:
			deleted++
			answered++
		case err == driver.ErrNotHeld:
			answered++
		default:
			firstErr = err
		}
	}
	if answered < d.quorum {
		return deleted > 0, fmt.Errorf("redlock: force release %q: %d of %d masters answered, want %d: %w", name, answered, len(d.masters), d.quorum, firstErr)
	}
	return deleted >= d.quorum, nil
}
