// Package delaymeta stores a lease's lock-delay (dlock.WithLockDelay) in
// front of its metadata, for redislock and redlock, whose keys keep a
// metadata field but no field for the delay: "\xff" + ms + "\xff" +
// metadata. Users' metadata is valid UTF-8 (dlock.WithMetadata), which
// never holds the byte 0xff, so no user's metadata reads as a delay, and
// a lease without a delay stores its metadata unchanged.
package delaymeta

import (
	"strconv"
	"strings"
	"time"
)

// mark opens and closes the delay.
const mark = "\xff"

// Encode returns the metadata field to store for a lease with metadata
// meta and lock-delay delay (meta itself when delay is not above 0).
func Encode(meta string, delay time.Duration) string {
	if delay <= 0 {
		return meta
	}
	return mark + strconv.FormatInt(delay.Milliseconds(), 10) + mark + meta
}

// Decode splits a stored metadata field into the lock-delay (0 if none)
// and the user's metadata.
func Decode(s string) (time.Duration, string) {
	rest, ok := strings.CutPrefix(s, mark)
	if !ok {
		return 0, s
	}
	n, meta, ok := strings.Cut(rest, mark)
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 0 {
		return 0, s
	}
	return time.Duration(v) * time.Millisecond, meta
}
