package testserver

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

//go:embed clockshim/clockshim.c
var clockShimSource []byte

// Clock is the wall clock of the server processes started with it: the
// host's, plus an offset the test steps with Step while they run. It works
// through an LD_PRELOAD library (clockshim/clockshim.c) that shifts
// CLOCK_REALTIME, gettimeofday and time for C servers (redis-server,
// postgres, mariadbd); their monotonic clocks, and everything outside
// those processes, are untouched. Go servers read the clock through the
// vDSO, past any preload: give them no Clock.
type Clock struct {
	shim string       // the library's path
	file string       // the offset file the library maps
	mem  []byte       // that file, mapped
	mu   sync.Mutex   // serialises Step
	off  atomic.Int64 // ns, mirrors the file
}

// NewClock returns a Clock with offset 0. It builds the library with the
// system's C compiler the first time in a process (cached by the source's
// hash in a directory under the system's temporary directory), and fails the test if it cannot.
// The files are readable by every user, since postgres runs as its own.
func NewClock(t testing.TB) *Clock {
	t.Helper()
	shim, err := buildClockShim()
	if err != nil {
		t.Fatalf("testserver: clock shim: %v", err)
	}
	dir, err := os.MkdirTemp("", "dlock-clock-")
	if err != nil {
		t.Fatalf("testserver: clock: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testserver: clock: %v", err)
	}
	file := filepath.Join(dir, "offset")
	if err := os.WriteFile(file, make([]byte, 8), 0o644); err != nil {
		t.Fatalf("testserver: clock: %v", err)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("testserver: clock: %v", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("testserver: clock: mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return &Clock{shim: shim, file: file, mem: mem}
}

// Step moves the clock by d (forward if positive, back if negative), at
// once for every process started with it.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.off.Add(int64(d))
	atomic.StoreInt64((*int64)(unsafe.Pointer(&c.mem[0])), v)
}

// File returns the path of the clock's offset file: 8 bytes, the offset
// in nanoseconds as a native-endian int64, which a process that cannot
// take the LD_PRELOAD library (a Go program: SQLite inside it) may map
// and add to its own readings of the wall clock.
func (c *Clock) File() string { return c.file }

// Offset returns how far the clock is from the host's.
func (c *Clock) Offset() time.Duration { return time.Duration(c.off.Load()) }

// env returns the environment entries that put a process on c; nil for a
// nil c.
func (c *Clock) env() []string {
	if c == nil {
		return nil
	}
	return []string{"LD_PRELOAD=" + c.shim, "DLOCK_CLOCK_FILE=" + c.file}
}

var clockShim struct {
	once sync.Once
	path string
	err  error
}

func buildClockShim() (string, error) {
	clockShim.once.Do(func() {
		sum := sha256.Sum256(clockShimSource)
		// Not the user's cache directory: root's is private, and
		// postgres runs as its own user.
		dir := filepath.Join(os.TempDir(), "dlock-testserver")
		path := filepath.Join(dir, "clockshim-"+hex.EncodeToString(sum[:8])+".so")
		clockShim.path = path
		if _, err := os.Stat(path); err == nil {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			clockShim.err = err
			return
		}
		src := filepath.Join(dir, fmt.Sprintf("clockshim-%d.c", os.Getpid()))
		if err := os.WriteFile(src, clockShimSource, 0o644); err != nil {
			clockShim.err = err
			return
		}
		defer os.Remove(src)
		tmp := path + fmt.Sprintf(".%d", os.Getpid())
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		out, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-o", tmp, src).CombinedOutput()
		if err != nil {
			clockShim.err = fmt.Errorf("%s: %v\n%s", cc, err, out)
			return
		}
		os.Chmod(tmp, 0o755)
		clockShim.err = os.Rename(tmp, path)
	})
	return clockShim.path, clockShim.err
}
