package redislock

import (
	"strconv"
	"strings"
)

// parseValue decodes an exclusive holder's value (or a tombstone, whose
// owner is empty) as lua/value.lua does: the owner, the fence and what
// follows the stamp (",qexp" and "|metadata"). It reads both the packed
// form of this version (owner|H, then the fence in 7 bytes, the lease and
// the renewal counter in the lengths H gives) and the decimal form of
// earlier versions (owner|fence.ttl.n). ok is false for a value dlock
// did not write.
func parseValue(v string) (owner string, fence uint64, rest string, ok bool) {
	owner, tail, ok := strings.Cut(v, "|")
	if !ok || tail == "" {
		return "", 0, "", false
	}
	if h := tail[0]; h >= 'H' && h <= 'g' {
		lt, ln := int(h-64)/8, int(h-64)%8
		end := 1 + 7 + lt + ln
		if len(tail) < end {
			return "", 0, "", false
		}
		for i := 1; i < 8; i++ {
			fence = fence<<8 | uint64(tail[i])
		}
		return owner, fence, tail[end:], true
	}
	end := strings.IndexAny(tail, ".,|")
	if end < 0 {
		end = len(tail)
	}
	fence, err := strconv.ParseUint(tail[:end], 10, 64)
	if err != nil {
		return "", 0, "", false
	}
	// Skip the decimal lease and renewal counter, if recorded.
	for end < len(tail) && (tail[end] == '.' || tail[end] >= '0' && tail[end] <= '9') {
		end++
	}
	return owner, fence, tail[end:], true
}
