package redislock

import (
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/delaymeta"
)

// LockDelay implements driver.LockDelayer. A hold with a lock-delay is
// written as one with a lease of TTL+Delay: its key lives TTL+Delay plus
// the clock bound, and its value records TTL+Delay as the holder's lease,
// so every script (and every older version of them) keeps the name from
// other owners until then, and a waiter that observes the holder's stamp
// observes it for TTL+Delay (driver.Result.StampTTL counts the delay).
// The delay itself rides in the metadata field (package delaymeta), for
// Inspect alone: a hold without a delay stores exactly what it did before.
// Release deletes the hold at once, as always.
func (d *redisDriver) LockDelay() bool { return true }

// storedMeta is the metadata field the scripts store for l: the delay
// in front of the metadata when l has one (see package delaymeta).
func storedMeta(l driver.Lease) string { return delaymeta.Encode(l.Metadata, l.Delay) }

// delayed fills h's Metadata and Delayed from its stored metadata field,
// once h.Remaining (the lease and the delay left) is set.
func delayed(h *driver.Holder) {
	var delay time.Duration
	delay, h.Metadata = delaymeta.Decode(h.Metadata)
	h.Delayed = delay > 0 && h.Remaining <= delay
}
