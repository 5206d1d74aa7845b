package etcdlock

import (
	"strconv"
	"strings"
	"time"
)

// A key's value is, for an acquisition without a lock-delay that was
// never resumed, the holder's metadata as it is, and its owner the one in
// the key's name. Any other key (a lock-delay, a resumed hold) has a
// marked value, which names its owner itself, since a key cannot be
// renamed without changing its create revision (the fencing token):
//
//	NUL state owner NUL delay-in-ms NUL metadata
//
// where state is 'h' (held) or 'd' (its lease ran out: in its
// lock-delay). Metadata has no NUL byte (dlock.WithMetadata refuses it),
// so a value that starts with one is marked.
type holdValue struct {
	owner    string
	delay    time.Duration
	delayed  bool
	metadata string
}

const (
	markHeld    = "\x00h"
	markDelayed = "\x00d"
)

// encode returns v as a marked value.
func (v holdValue) encode() string {
	state := markHeld
	if v.delayed {
		state = markDelayed
	}
	return state + v.owner + "\x00" + strconv.FormatInt(v.delay.Milliseconds(), 10) + "\x00" + v.metadata
}

// decodeValue returns what the value b of a key whose name's owner is
// nameOwner says of its holder. A marked value that does not parse is
// read as metadata of nameOwner (no dlock key has one).
func decodeValue(nameOwner string, b []byte) holdValue {
	s := string(b)
	if !strings.HasPrefix(s, markHeld) && !strings.HasPrefix(s, markDelayed) {
		return holdValue{owner: nameOwner, metadata: s}
	}
	parts := strings.SplitN(s[len(markHeld):], "\x00", 3)
	if len(parts) != 3 {
		return holdValue{owner: nameOwner, metadata: s}
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms < 0 {
		return holdValue{owner: nameOwner, metadata: s}
	}
	return holdValue{owner: parts[0], delay: time.Duration(ms) * time.Millisecond,
		delayed: strings.HasPrefix(s, markDelayed), metadata: parts[2]}
}
