package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// shop stands for the storage the demo's workers sell from: a file holding
// the stock and the highest fencing token it has seen. Each of its
// operations is atomic on its own (the file is flock'ed for the length of
// one operation, as a database makes one statement atomic); a purchase,
// which reads then writes, is only safe under a lock.
type shop struct{ path string }

type shopState struct {
	stock int
	high  uint64 // highest fencing token a write carried
}

// errStale is the storage rejecting a write whose fencing token is older
// than one it has already seen: the writer lost its lock meanwhile.
var errStale = errors.New("write rejected: a newer lock holder has written since (stale fencing token)")

func newShop(path string, stock int) (shop, error) {
	s := shop{path}
	return s, s.update(func(st *shopState) error {
		*st = shopState{stock: stock}
		return nil
	})
}

// read returns the stock.
func (s shop) read() (int, error) {
	var stock int
	err := s.update(func(st *shopState) error {
		stock = st.stock
		return nil
	})
	return stock, err
}

// write sets the stock. With fenced set it first checks fence against the
// highest token seen, as storage that supports fencing does.
func (s shop) write(stock int, fence uint64, fenced bool) error {
	return s.update(func(st *shopState) error {
		if fenced && fence < st.high {
			return errStale
		}
		st.high = max(st.high, fence)
		st.stock = stock
		return nil
	})
}

func (s shop) update(f func(*shopState) error) error {
	file, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	var st shopState
	data, err := os.ReadFile(s.path)
	if err != nil {
		return err
	}
	if text := strings.TrimSpace(string(data)); text != "" {
		stock, high, _ := strings.Cut(text, " ")
		st.stock, err = strconv.Atoi(stock)
		if err == nil {
			st.high, err = strconv.ParseUint(high, 10, 64)
		}
		if err != nil {
			return fmt.Errorf("shop file %s: %q: %w", s.path, text, err)
		}
	}
	if err := f(&st); err != nil {
		return err
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	_, err = file.WriteAt([]byte(fmt.Sprintf("%d %d\n", st.stock, st.high)), 0)
	return err
}
