package sqllock

import (
	"errors"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyWatcher is a dirWatcher on inotify. Its goroutine reads events
// until close closes the inotify file or the directory goes away.
type inotifyWatcher struct {
	f       *os.File
	done    chan struct{} // closed when the goroutine has exited
	stopped atomic.Bool
}

// watchDir watches dir for files closed after writing, and calls file
// with each one's name, or all when events were lost or the watch ended.
func watchDir(dir string, file func(string), all func()) (dirWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_ONLYDIR|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("inotify_add_watch", err)
	}
	// Non-blocking, so Read waits in the runtime's poller and Close ends
	// it.
	w := &inotifyWatcher{f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	go w.run(file, all) // exits when close closes w.f or the watch ends
	return w, nil
}

func (w *inotifyWatcher) run(file func(string), all func()) {
	defer close(w.done)
	defer w.stopped.Store(true)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				all() // the watch is broken: waiters look again
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameAt := off + unix.SizeofInotifyEvent
			off = nameAt + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				all()
			case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
				// The directory is gone: the next watch makes it again.
				w.stopped.Store(true)
				all()
				return
			case ev.Len > 0 && off <= n:
				name := buf[nameAt:off]
				for len(name) > 0 && name[len(name)-1] == 0 {
					name = name[:len(name)-1]
				}
				file(string(name))
			}
		}
	}
}

func (w *inotifyWatcher) dead() bool { return w.stopped.Load() }

func (w *inotifyWatcher) close() {
	w.f.Close()
	<-w.done
}
