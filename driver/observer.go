package driver

import "time"

// Observer applies the takeover rule of Result.Stamp for one wait: it
// remembers the stamp a waiter last saw and when it first saw it, on the
// waiter's own monotonic clock. The core uses one per waiting Acquire; a
// Queuer that runs its own wait loop (see AcquireQueued) uses one too, so
// that both follow the same rule. The zero value is ready; an Observer is
// not safe for concurrent use.
type Observer struct {
	stamp string
	seen  time.Time     // monotonic: when stamp was first seen
	ttl   time.Duration // the StampTTL that came with it
}

// Note records the outcome of an Acquire whose reply arrived at now
// (read after the reply, so no later than the store's state the Result
// describes). It returns the Takeover to send with the next Acquire, ""
// until the same Stamp has been seen for its StampTTL, and, when it
// returns "", how long the waiter may go before it looks again (0 when
// res carries no Stamp): until a takeover would be due, and at most a
// third of StampTTL, so that it first sees the holders' last state
// within a third of their lease of its writing, and a holder that died
// is taken over at most 4/3 of its TTL after its last renewal.
func (o *Observer) Note(res Result, now time.Time) (takeover string, wait time.Duration) {
	if res.Acquired || res.Stamp == "" {
		o.stamp = ""
		return "", 0
	}
	if res.Stamp != o.stamp {
		o.stamp, o.seen = res.Stamp, now
	}
	o.ttl = res.StampTTL
	left := res.StampTTL - now.Sub(o.seen)
	if left <= 0 {
		return o.stamp, 0
	}
	return "", min(left, max(res.StampTTL/3, time.Millisecond))
}

// Due returns the Takeover an attempt made at now may send: the stamp
// last noted, if it has been seen unchanged for its StampTTL by now, or
// "". It lets a caller that makes single attempts now and then (each
// noted) apply the same rule as a wait loop.
func (o *Observer) Due(now time.Time) string {
	if o.stamp == "" || now.Sub(o.seen) < o.ttl {
		return ""
	}
	return o.stamp
}
