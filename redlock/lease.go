package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// Refresh extends each lease on every master, one pipeline per master,
// and re-creates it where it is gone. A lease stays held if a majority of
// the masters still held it, with its token: l.Fence when that is not 0,
// else the token its acquisition here got (see the package
// documentation).
func (d *rlDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	if len(ls) == 0 {
		return nil
	}
	timeout := d.timeoutFor(ls[0].TTL)
	errs := make([]error, len(ls))
	var (
		send      []int          // the leases sent to the masters, by index in ls
		onMasters []driver.Lease // with the owners their keys carry
		tokens    []uint64       // the token each must carry (0: any)
	)
	for i, l := range ls {
		h := d.token(l.Owner)
		tok := h.token
		if l.Fence != 0 {
			if h.key != "" && h.token != l.Fence {
				// This owner's acquisition here got another token: the
				// lease the core describes is not the one the masters hold.
				errs[i] = fmt.Errorf("redlock: refresh %q: token %d, acquired here with %d: %w", l.Name, l.Fence, h.token, driver.ErrNotHeld)
				continue
			}
			tok = l.Fence // the masters' keys must carry exactly it (see refreshScript)
		}
		if h.key != "" {
			l.Owner = h.key
		}
		timeout = min(timeout, d.timeoutFor(l.TTL))
		send = append(send, i)
		onMasters = append(onMasters, l)
		tokens = append(tokens, tok)
	}
	if len(send) == 0 {
		return errs
	}
	// results[m][j] is master m's answer for lease send[j]: 1 extended, 2
	// re-created, 0 held by another owner (or with another token), -1
	// unknown.
	noAnswer := make([]int, len(send))
	for j := range noAnswer {
		noAnswer[j] = -1
	}
	results := each(ctx, d, timeout, noAnswer, func(ctx context.Context, _ int, c redisconn.Conn) []int {
		return d.refreshOn(ctx, c, onMasters, tokens)
	}, nil, nil) // every answer: a refresh left to finish after a Release could re-create the key
	for j, i := range send {
		l := ls[i]
		held, unknown := 0, 0
		for m := range results {
			switch results[m][j] {
			case 1:
				held++
			case -1:
				unknown++
			}
		}
		switch {
		case held >= d.quorum:
		case held+unknown >= d.quorum:
			errs[i] = fmt.Errorf("redlock: refresh %q: %d of %d masters extended it and %d did not answer, want %d", l.Name, held, len(d.masters), unknown, d.quorum)
		default:
			errs[i] = fmt.Errorf("redlock: refresh %q: held on %d of %d masters, want %d: %w", l.Name, held, len(d.masters), d.quorum, driver.ErrNotHeld)
			d.giveBack(ctx, onMasters[j], "r", nil) // what it re-created, and the minority it still held
			d.forget(l.Owner)
		}
	}
	return errs
}

// refreshOn runs the refresh script for every lease on one master, in one
// pipeline, and returns each lease's answer (-1 when unknown).
func (d *rlDriver) refreshOn(ctx context.Context, c redisconn.Conn, ls []driver.Lease, tokens []uint64) []int {
	out := make([]int, len(ls))
	for attempt := range 2 {
		cmds := make([]redisconn.Cmd, len(ls))
		for i, l := range ls {
			args := redisconn.Args(l.Owner, ms(l.TTL+l.Delay), tokens[i], storedMeta(l), markSeconds())
			cmds[i] = refreshScript.Cmd(attempt > 0, d.keys(l.Name)[:2], args) // EVALSHA, then EVAL if the master lacks it
		}
		noScript := false
		for i, r := range c.Pipeline(ctx, cmds) {
			r.Err = refreshScript.LocateError(r.Err)
			n, err := r.Int64()
			if err != nil {
				n = -1
				noScript = noScript || luascript.IsNoScript(err)
			}
			out[i] = int(n)
		}
		if !noScript {
			break
		}
	}
	return out
}

// Release frees l.Name on every master where l.Owner holds it and wakes
// its waiters. It reports ErrNotHeld if the owner held it on too few
// masters to have held the lock. It returns nil once a quorum freed it
// and the other masters had as long again (see each), without waiting
// longer for them (a dead or stalled minority): the lease is then on a
// minority at most, which no one counts as held, and their steps go on
// in the background, bounded by the per-master timeout (Close waits for
// them).
func (d *rlDriver) Release(ctx context.Context, l driver.Lease) error {
	defer d.forget(l.Owner)
	var errs []error
	if h := d.token(l.Owner); h.key != "" {
		l.Owner = h.key
		errs = d.giveBack(ctx, l, "r", wasFreed)
	} else {
		// An acquisition that failed or whose reply was lost: free what
		// any of its attempts may have left (the core no longer retries).
		errs = d.giveBackAny(ctx, l)
	}
	freed, unknown := 0, 0
	var firstErr error
	for _, err := range errs {
		switch {
		case err == nil:
			freed++
		case !errors.Is(err, driver.ErrNotHeld):
			unknown++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	switch {
	case freed >= d.quorum:
		return nil
	case freed+unknown >= d.quorum:
		return fmt.Errorf("redlock: release %q: freed on %d of %d masters, %d did not answer: %w", l.Name, freed, len(d.masters), unknown, firstErr)
	}
	return fmt.Errorf("redlock: release %q: held on %d of %d masters: %w", l.Name, freed, len(d.masters), driver.ErrNotHeld)
}
