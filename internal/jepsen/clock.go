package jepsen

import "golang.org/x/sys/unix"

// now returns CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the host, unlike Go's per-process monotonic readings.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("jepsen: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
