package main

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clock returns the time since boot, counting time the machine spent
// suspended, which the monotonic clock of package time does not: a lease
// runs out on the server while a laptop sleeps.
func clock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Since(clockStart)
	}
	return time.Duration(ts.Nano())
}

var clockStart = time.Now()

// dieWithParent makes the kernel kill the process a started with when the
// thread that started it ends (see startChild).
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
