package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/rediserr"
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
	tokens := make([]uint64, len(ls))
	onMasters := slices.Clone(ls) // with the owners their keys carry
	for i, l := range ls {
		timeout = min(timeout, d.timeoutFor(l.TTL))
		h := d.token(l.Owner)
		tokens[i] = h.token
		if l.Fence != 0 {
			// The token the core believes this acquisition holds: the
			// masters' keys must carry exactly it (see refreshScript).
			tokens[i] = l.Fence
		}
		if h.key != "" {
			onMasters[i].Owner = h.key
		}
	}
	// results[m][i] is master m's answer for lease i: 1 extended, 2
	// re-created, 0 held by another owner, -1 unknown.
	noAnswer := make([]int, len(ls))
	for i := range noAnswer {
		noAnswer[i] = -1
	}
	results := each(ctx, d, timeout, noAnswer, func(ctx context.Context, _ int, c redis.UniversalClient) []int {
		return d.refreshOn(ctx, c, onMasters, tokens)
	}, nil)
	errs := make([]error, len(ls))
	for i, l := range ls {
		held, unknown := 0, 0
		for m := range results {
			switch results[m][i] {
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
			d.giveBack(ctx, onMasters[i], "r") // what it re-created, and the minority it still held
			d.forget(l.Owner)
		}
	}
	return errs
}

// refreshOn runs the refresh script for every lease on one master, in one
// pipeline, and returns each lease's answer (-1 when unknown).
func (d *rlDriver) refreshOn(ctx context.Context, c redis.UniversalClient, ls []driver.Lease, tokens []uint64) []int {
	out := make([]int, len(ls))
	for attempt := range 2 {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(ls))
		for i, l := range ls {
			keys, args := d.keys(l.Name)[:2], []any{l.Owner, ms(l.TTL), tokens[i], l.Metadata, markSeconds()}
			if attempt == 0 {
				cmds[i] = refreshScript.EvalSha(ctx, pipe, keys, args...)
			} else {
				cmds[i] = refreshScript.Eval(ctx, pipe, keys, args...)
			}
		}
		_, _ = pipe.Exec(ctx)
		noScript := false
		for i, cmd := range cmds {
			n, err := cmd.Int()
			if err != nil {
				n = -1
				noScript = noScript || strings.HasPrefix(err.Error(), "NOSCRIPT")
			}
			out[i] = n
		}
		if !noScript {
			break
		}
	}
	return out
}

// Release frees l.Name on every master where l.Owner holds it and wakes
// its waiters. It reports ErrNotHeld if the owner held it on too few
// masters to have held the lock.
func (d *rlDriver) Release(ctx context.Context, l driver.Lease) error {
	defer d.forget(l.Owner)
	var errs []error
	if h := d.token(l.Owner); h.key != "" {
		l.Owner = h.key
		errs = d.giveBack(ctx, l, "r")
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
		return fmt.Errorf("redlock: release %q: freed on %d of %d masters, %d did not answer: %w", l.Name, freed, len(d.masters), unknown, rediserr.Denied(firstErr))
	}
	return fmt.Errorf("redlock: release %q: held on %d of %d masters: %w", l.Name, freed, len(d.masters), driver.ErrNotHeld)
}
