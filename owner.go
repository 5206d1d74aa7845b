package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// owner is a logical lock owner: the chain of nested acquisitions that
// share a Lock's Context. Acquire with a context carrying an owner of the
// same Locker re-enters the names that owner holds, and new names it
// takes join the owner.
type owner struct {
	l     *Locker
	names map[string]*held // guarded by l.mu
}

type ownerKey struct{}

func ownerFrom(ctx context.Context, l *Locker) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	if o == nil || o.l != l {
		return nil
	}
	return o
}

// newLockerID returns 128 random bits in hex: the Locker's part of every
// owner string it sends to the server.
func newLockerID() string {
	var b [16]byte
	rand.Read(b[:]) // never returns an error (crypto/rand documents this)
	return hex.EncodeToString(b[:])
}

// ownerString is the server-side owner of one acquisition: the Locker's
// random identity and a per-acquisition sequence number, fixed width.
func (l *Locker) ownerString() string {
	return fmt.Sprintf("%s:%016x", l.id, l.seq.Add(1))
}

// quote formats a name for error messages, shortening very long ones.
func quote(name string) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q...(%d bytes)", name[:max], len(name))
	}
	return fmt.Sprintf("%q", name)
}
