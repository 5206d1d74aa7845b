package redislock

import (
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// LockDelay implements driver.LockDelayer. A hold with a lock-delay is
// written as one with a lease of TTL+Delay: its key lives TTL+Delay plus
// the clock bound, and its value records TTL+Delay as the holder's lease,
// so every script (and every older version of them) keeps the name from
// other owners until then, and a waiter that observes the holder's stamp
// observes it for TTL+Delay (driver.Result.StampTTL counts the delay).
// The delay itself rides in the metadata field, behind delayMark, for
// Inspect alone: a hold without a delay stores exactly what it did before.
// Release deletes the hold at once, as always.
func (d *redisDriver) LockDelay() bool { return true }

// delayMark opens and closes the delay, in ms, at the start of a stored
// metadata field: "\xff" + ms + "\xff" + metadata. Users' metadata is
// valid UTF-8 (dlock.WithMetadata), which never holds the byte 0xff, so
// no user's metadata reads as a delay.
const delayMark = "\xff"

// storedMeta is the metadata field the scripts store for l.
func storedMeta(l driver.Lease) string {
	if l.Delay <= 0 {
		return l.Metadata
	}
	return delayMark + strconv.FormatInt(ms(l.Delay), 10) + delayMark + l.Metadata
}

// parseMeta splits a stored metadata field into the lock-delay and the
// user's metadata.
func parseMeta(s string) (time.Duration, string) {
	rest, ok := strings.CutPrefix(s, delayMark)
	if !ok {
		return 0, s
	}
	n, meta, ok := strings.Cut(rest, delayMark)
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil {
		return 0, s
	}
	return time.Duration(v) * time.Millisecond, meta
}

// delayed fills h's Metadata and Delayed from its stored metadata field,
// once h.Remaining (the lease and the delay left) is set.
func delayed(h *driver.Holder) {
	var delay time.Duration
	delay, h.Metadata = parseMeta(h.Metadata)
	h.Delayed = delay > 0 && h.Remaining <= delay
}
