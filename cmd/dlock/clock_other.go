//go:build !linux

package main

import (
	"syscall"
	"time"
)

var clockStart = time.Now()

// clock returns the monotonic time since dlock started.
func clock() time.Duration { return time.Since(clockStart) }

// dieWithParent does nothing: only Linux kills a child with its parent.
func dieWithParent(*syscall.SysProcAttr) {}
