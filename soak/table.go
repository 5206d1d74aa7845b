package soak

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Names is the number of names the workers loop over: 0-899 are locks
// (exclusive 8 times in 9, shared once), 900-999 semaphores of
// SemaphoreLimit, so that a name is only ever used in one family.
const (
	Names          = 1000
	SemaphoreNames = 100
	SemaphoreLimit = 3
)

// exclusiveBit marks, in a worker's byte of a slot, an exclusive hold.
const exclusiveBit = 0x80

// restartSlot is the slot after the names where the runner stores when
// the server (or the worker) came back, in Unix nanoseconds.
const restartSlot = Names

// Table is the exclusion table the workers share: a file mapped into
// every worker, one 64-bit slot per name, in which byte w counts the
// holds of worker w (0x80: an exclusive one). Every change is one atomic
// operation on the slot, so a hold that contradicts another one in any
// process is seen by the one that makes it.
type Table struct {
	mem   []byte
	slots []uint64
}

// OpenTable maps path, creating it with room for every name if needed.
func OpenTable(path string) (*Table, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := (Names + 1) * 8
	if err := f.Truncate(int64(size)); err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	slots := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), Names+1)
	return &Table{mem: mem, slots: slots}, nil
}

// Close unmaps the table.
func (t *Table) Close() error { return syscall.Munmap(t.mem) }

// Enter records a hold of name i by worker w in mode (exclusive, shared
// or a permit) and reports whether it agrees with every other hold: an
// exclusive hold with none, a shared hold with no exclusive one, a permit
// with at most SemaphoreLimit permits in all. A hold that disagrees is
// not recorded.
func (t *Table) Enter(i, w int, m Mode) bool {
	p := &t.slots[i]
	shift := uint(8 * w)
	for {
		v := atomic.LoadUint64(p)
		var nv uint64
		switch m {
		case Exclusive:
			if v != 0 {
				return false
			}
			nv = exclusiveBit << shift
		case Shared:
			if hasExclusive(v) {
				return false
			}
			nv = v + 1<<shift
		case Permit:
			if permits(v) >= SemaphoreLimit {
				return false
			}
			nv = v + 1<<shift
		}
		if atomic.CompareAndSwapUint64(p, v, nv) {
			return true
		}
	}
}

// Leave takes out a hold recorded by Enter.
func (t *Table) Leave(i, w int, m Mode) {
	shift := uint(8 * w)
	if m == Exclusive {
		atomic.AddUint64(&t.slots[i], ^(exclusiveBit<<shift - 1))
		return
	}
	atomic.AddUint64(&t.slots[i], ^(1<<shift - 1))
}

// Forget takes out every hold of worker w, which was killed while holding
// them (its leases then stay on the server until they expire, so no
// other worker can hold them meanwhile).
func (t *Table) Forget(w int) {
	shift := uint(8 * w)
	for i := range Names {
		p := &t.slots[i]
		for {
			v := atomic.LoadUint64(p)
			if atomic.CompareAndSwapUint64(p, v, v&^(0xff<<shift)) {
				break
			}
		}
	}
}

// SetRestarted records when the server came back, in Unix nanoseconds.
func (t *Table) SetRestarted(ns int64) { atomic.StoreUint64(&t.slots[restartSlot], uint64(ns)) }

// Restarted returns what SetRestarted recorded, 0 if nothing.
func (t *Table) Restarted() int64 { return int64(atomic.LoadUint64(&t.slots[restartSlot])) }

func hasExclusive(v uint64) bool {
	for ; v != 0; v >>= 8 {
		if v&exclusiveBit != 0 {
			return true
		}
	}
	return false
}

func permits(v uint64) uint64 {
	var n uint64
	for ; v != 0; v >>= 8 {
		n += v & 0x7f
	}
	return n
}
