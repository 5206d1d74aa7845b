package dlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// owner is a logical lock owner: the chain of nested acquisitions that
// share a Lock's Context. Acquire with a context carrying an owner of the
// same Locker re-enters the names that owner holds, and new names it
// takes join the owner.
type owner struct {
	l *Locker

	// The names it holds, guarded by l.mu: in one while it holds at
	// most one (most owners), in names once it has held two at once.
	one   *held
	names map[string]*held
}

// get returns the acquisition of name that o holds, or nil.
func (o *owner) get(name string) *held {
	if o.names == nil {
		if o.one != nil && o.one.lease.Name == name {
			return o.one
		}
		return nil
	}
	return o.names[name]
}

// put records h as o's acquisition of its name.
func (o *owner) put(h *held) {
	if o.names == nil {
		if o.one == nil || o.one.lease.Name == h.lease.Name {
			o.one = h
			return
		}
		o.names = map[string]*held{o.one.lease.Name: o.one}
		o.one = nil
	}
	o.names[h.lease.Name] = h
}

// drop forgets h if it is o's acquisition of its name.
func (o *owner) drop(h *held) {
	switch {
	case o.names != nil:
		if o.names[h.lease.Name] == h {
			delete(o.names, h.lease.Name)
		}
	case o.one == h:
		o.one = nil
	}
}

type ownerKey struct{}

// ownerContext is the parent of an acquisition's handle contexts: the
// values of the acquiring call's context and the owner, without that
// context's cancellation or deadline (as context.WithoutCancel and
// context.WithValue would make it, in two allocations; this one lives in
// the held). It is never handed out on its own: context.Cause would see
// through it to the acquiring call's cancellation, whereas each handle's
// own context answers that lookup first.
type ownerContext struct {
	values context.Context
	owner  *owner
}

func (c *ownerContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *ownerContext) Done() <-chan struct{}       { return nil }
func (c *ownerContext) Err() error                  { return nil }

func (c *ownerContext) String() string {
	return fmt.Sprint(c.values) + ".WithoutCancel.WithValue(dlock owner)"
}

func (c *ownerContext) Value(key any) any {
	if key == (ownerKey{}) {
		return c.owner
	}
	return c.values.Value(key)
}

func ownerFrom(ctx context.Context, l *Locker) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	if o == nil || o.l != l {
		return nil
	}
	return o
}

// newLockerID returns 64 random bits in unpadded base64url (11
// characters): the Locker's part of every owner string it sends to the
// server. Owners are compared only among one name's holders and waiters,
// so two Lockers' owners collide only if their ids and acquisition
// numbers are equal and they wait for or hold the same name: with n
// Lockers ever sharing a store, their ids are all distinct but with
// probability at most n²/2⁶⁵ (below 3·10⁻⁸ for a million Lockers). 128
// bits would make that smaller still, but every held lock stores its
// owner: 11 characters fewer keep a Redis lock's value in one allocation
// (see redislock's DESIGN.md, "Memory").
func newLockerID() string {
	var b [8]byte
	rand.Read(b[:]) // never returns an error (crypto/rand documents this)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ownerString is the server-side owner of one acquisition: the Locker's
// random identity, ':', and a per-acquisition sequence number in base 36.
// It is short because stores keep it with every held lock.
func (l *Locker) ownerString() string {
	b := make([]byte, 0, len(l.id)+8)
	b = append(append(b, l.id...), ':')
	return string(strconv.AppendUint(b, l.seq.Add(1), 36))
}
