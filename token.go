package dlock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/lockmode"
)

// tokenPrefix starts every token; the digit is the format's version.
const tokenPrefix = "dlock1."

// maxTokenLen bounds the tokens Resume reads: a name and metadata-free
// fields, base64-encoded, are far shorter.
const maxTokenLen = 4096

// tokenFields is what a token carries, encoded as JSON in base64url.
type tokenFields struct {
	Backend string `json:"b"`
	Scope   string `json:"s,omitempty"`
	Name    string `json:"n"`
	Owner   string `json:"o"`
	Fence   uint64 `json:"f"`
	TTL     int64  `json:"t"`           // milliseconds
	Delay   int64  `json:"d,omitempty"` // lock-delay, milliseconds
	Shared  bool   `json:"sh,omitempty"`
	Limit   int    `json:"l,omitempty"`
}

// Token returns an opaque, printable string that names this hold: its
// backend and namespace, name, owner, fencing token, mode and TTL. It is
// safe to log, pass to another process or keep in a job record: it holds
// no credentials and grants nothing by itself. Locker.Resume adopts the
// hold it names, if that hold is still what the store has.
func (k *Lock) Token() string {
	l := k.h.l
	l.mu.Lock()
	lease := k.h.lease
	l.mu.Unlock()
	f := tokenFields{Backend: l.backend, Name: lease.Name, Owner: lease.Owner, Fence: lease.Fence,
		TTL: lease.TTL.Milliseconds(), Delay: lease.Delay.Milliseconds(), Shared: lease.Shared, Limit: lease.Limit}
	if r, ok := l.drv.(driver.Resumer); ok {
		f.Scope = r.Scope()
	}
	b, _ := json.Marshal(f) // cannot fail: strings, numbers and bools
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseToken decodes a token made by Token, or returns an error wrapping
// ErrInvalid.
func parseToken(token string) (tokenFields, error) {
	var f tokenFields
	body, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok || len(token) > maxTokenLen {
		return f, fmt.Errorf("not a dlock token (want %q…, at most %d bytes): %w", tokenPrefix, maxTokenLen, ErrInvalid)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		return f, fmt.Errorf("malformed token: %w", ErrInvalid)
	}
	ttl := time.Duration(f.TTL) * time.Millisecond
	switch {
	case f.Backend == "" || f.Owner == "" || f.Fence == 0:
		return f, fmt.Errorf("malformed token: no backend, owner or fencing token: %w", ErrInvalid)
	case driver.ValidateName(f.Name) != nil:
		return f, fmt.Errorf("malformed token: bad lock name: %w", ErrInvalid)
	case ttl < driver.MinTTL || ttl > driver.MaxTTL || f.Limit < 0 || (f.Shared && f.Limit > 0) ||
		f.Delay < 0 || time.Duration(f.Delay)*time.Millisecond > driver.MaxLockDelay:
		return f, fmt.Errorf("malformed token: bad TTL or mode: %w", ErrInvalid)
	}
	return f, nil
}

// Resume adopts the hold that token (from Lock.Token, in this process or
// another) names, through one owner- and token-checked step on the store:
// the returned Lock has the same name, mode and fencing token, a new
// owner of this Locker's, a lease of the token's TTL (or WithTTL's) from
// now, renewed like any lock unless WithoutRenewal is given, and Release
// frees the name. Releasing a lock from another process is Resume, then
// Release. Shared and WithLimit, if given, must match the token's mode.
//
// If the hold is gone (released, expired, taken over, or resumed
// already), the error wraps ErrNotHeld. A malformed token, or one from
// another backend or another namespace (key prefix, table), gets an
// error wrapping ErrInvalid; a backend that cannot move a hold to
// another owner, one wrapping ErrUnsupported (ZooKeeper: a lock is an
// ephemeral node that belongs to its session for life).
//
// What the two holders see: the resumed Lock holds the name from the
// step on. The original handle, if its process still runs, learns
// nothing until its own next renewal (within TTL/3) or Refresh, which
// finds another owner and closes its Done with ErrLost; its Release
// returns ErrNotHeld and frees nothing. Until then both believe they
// hold the name, with the same fencing token, so storage that checks
// tokens cannot tell them apart: resume a hold whose first holder has
// stopped (crashed, or handed the job on), not one still at work.
func (l *Locker) Resume(ctx context.Context, token string, opts ...Option) (*Lock, error) {
	if ctx == nil {
		return nil, errorf("dlock: resume: nil context: %w", ErrInvalid)
	}
	f, err := parseToken(token)
	if err != nil {
		return nil, errorf("dlock: resume: %w", err)
	}
	r, err := l.resumer(f)
	if err != nil {
		return nil, errorf("dlock: resume %s: %w", quote(f.Name), err)
	}
	a := &attempt{ctx: ctx}
	o := &a.opts
	if err := o.build(append([]Option{WithTTL(time.Duration(f.TTL) * time.Millisecond)}, opts...)); err != nil {
		return nil, errorf("dlock: resume %s: %w", quote(f.Name), err)
	}
	if (o.shared && !f.Shared) || (o.limitSet && o.limit != f.Limit) {
		return nil, errorf("dlock: resume %s: the options ask for %s, the token names %s: %w", quote(f.Name),
			lockmode.String(o.shared, o.limit), lockmode.String(f.Shared, f.Limit), ErrInvalid)
	}
	if err := l.begin(); err != nil {
		return nil, errorf("dlock: resume %s: %w", quote(f.Name), err)
	}
	defer l.acquiring.Done()
	a.own = ownerFrom(ctx, l)
	if a.own != nil {
		l.mu.Lock()
		h := a.own.get(f.Name)
		holds := h != nil && h.state == active
		l.mu.Unlock()
		if holds {
			return nil, errorf("dlock: resume %s: the context's lock holds the name already (resume with a context that holds no lock on it): %w", quote(f.Name), ErrInvalid)
		}
	}
	a.renew = !o.noRenew
	delay := time.Duration(f.Delay) * time.Millisecond
	from := driver.Lease{Name: f.Name, Owner: f.Owner, Fence: f.Fence, TTL: time.Duration(f.TTL) * time.Millisecond, Shared: f.Shared, Limit: f.Limit, Delay: delay}
	a.lease = driver.Lease{Name: f.Name, Owner: l.ownerString(), TTL: o.ttl, Metadata: o.metadata, Shared: f.Shared, Limit: f.Limit, Delay: delay}
	start := time.Now()
	res, err := resumeStep(l, ctx, r, from, a.lease)
	if err == nil && (!res.Acquired || res.Fence != f.Fence) {
		err = fmt.Errorf("the backend's Resume returned %+v for token %d", res, f.Fence)
	}
	if err != nil {
		err = l.storeError(err)
		if errors.Is(err, driver.ErrNotHeld) {
			return nil, said(fmt.Sprintf("dlock: resume %s: the hold is gone: %s", quote(f.Name), withoutPrefix(err.Error(), quote(f.Name))), ErrNotHeld, err)
		}
		return nil, errorf("dlock: resume %s: %w", quote(f.Name), err)
	}
	if !res.LeaseStart.IsZero() {
		start = res.LeaseStart
	}
	return l.register(a, f.Fence, start)
}

// resumer returns l's driver as a Resumer for tokens with fields f, or an
// error wrapping ErrInvalid (another backend or namespace) or
// ErrUnsupported.
func (l *Locker) resumer(f tokenFields) (driver.Resumer, error) {
	if f.Backend != l.backend {
		return nil, fmt.Errorf("the token is from the %s backend, this Locker's is %s: %w", f.Backend, l.backend, ErrInvalid)
	}
	r, ok := l.drv.(driver.Resumer)
	if !ok {
		return nil, fmt.Errorf("the %s backend cannot move a hold to another owner: %w", l.backend, ErrUnsupported)
	}
	if s := r.Scope(); f.Scope != s {
		return nil, fmt.Errorf("the token is from namespace %q, this Locker's is %q: %w", f.Scope, s, ErrInvalid)
	}
	if (f.Shared || f.Limit > 0) && !l.multi || f.Delay > 0 && !l.delays {
		return nil, fmt.Errorf("the backend has no shared locks, semaphores or lock-delays: %w", ErrInvalid)
	}
	return r, nil
}

func resumeStep(l *Locker, ctx context.Context, r driver.Resumer, from, to driver.Lease) (driver.Result, error) {
	if l.direct(ctx) {
		return r.Resume(ctx, from, to)
	}
	return call(l, ctx, func() (driver.Result, error) { return r.Resume(ctx, from, to) }, func(res driver.Result, err error) {
		if err == nil && res.Acquired {
			l.abandon(to) // the caller gave up: free what the late step took
		}
	})
}
