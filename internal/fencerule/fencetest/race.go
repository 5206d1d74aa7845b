package fencetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// op is one write of the race test.
type op struct {
	token      uint64
	start, end time.Time // monotonic
	err        error
}

// The race test's shape: writers, each making writes.
const writers, writes = 8, 30

// testRace runs writers that take increasing tokens from one counter, as
// successive holders of a lock would, and write at once, some of them
// after a pause, while a reader watches. A lower token must never land
// after a higher one: the stored token never decreases, no write is
// accepted after a write with a higher token had been accepted, and every
// refusal is explained by a higher token written before it ended.
func testRace(t *testing.T, s Store, r string) {
	stop := make(chan struct{})
	var (
		reader    sync.WaitGroup
		readerErr error
		reads     int
	)
	reader.Go(func() { reads, readerErr = watch(s, r, stop) })
	ops := race(t, s, r)
	close(stop)
	reader.Wait()
	if readerErr != nil {
		t.Error(readerErr)
	}
	accepted, refused := split(t, r, ops)
	vs := violations(r, accepted, refused)
	for i, v := range vs {
		if i == 5 {
			t.Errorf("... and %d more", len(vs)-i)
			break
		}
		t.Error(v)
	}
	WantStored(t, s, r, writers*writes, strconv.Itoa(writers*writes))
	t.Logf("%d writes: %d accepted, %d refused as stale; %d reads", len(ops), len(accepted), len(refused), reads)
}

// watch reads r until stop is closed, and returns how many reads it made
// and the first violation it saw: a token lower than one read before, or
// a value not written with its token.
func watch(s Store, r string, stop <-chan struct{}) (int, error) {
	var last uint64
	for reads := 0; ; reads++ {
		select {
		case <-stop:
			return reads, nil
		default:
		}
		v, token, err := s.Read(context.Background(), r)
		if err != nil {
			return reads, fmt.Errorf("Read(%q) = %v, want nil", r, err)
		}
		if token < last {
			return reads, fmt.Errorf("Read(%q) = token %d after %d, want it never to decrease", r, token, last)
		}
		if token != 0 && !bytes.Equal(v, []byte(strconv.FormatUint(token, 10))) {
			return reads, fmt.Errorf("Read(%q) = %q, %d, want the value written with the token", r, v, token)
		}
		last = token
	}
}

// race runs the writers and returns their writes.
func race(t *testing.T, s Store, r string) []op {
	var (
		next atomic.Uint64
		mu   sync.Mutex
		ops  []op
		wg   sync.WaitGroup
	)
	for range writers {
		wg.Go(func() {
			for range writes {
				token := next.Add(1)
				if token%4 == 0 {
					// A holder paused between getting its token and
					// writing: higher tokens are written meanwhile.
					time.Sleep(2 * time.Millisecond)
				}
				o := op{token: token, start: time.Now()}
				o.err = s.Write(t.Context(), r, token, []byte(strconv.FormatUint(token, 10)))
				o.end = time.Now()
				mu.Lock()
				ops = append(ops, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ops
}

// split sorts the writes into accepted and refused as stale, and fails
// the test on any other outcome.
func split(t *testing.T, r string, ops []op) (accepted, refused []op) {
	t.Helper()
	for _, o := range ops {
		switch {
		case o.err == nil:
			accepted = append(accepted, o)
		case errors.Is(o.err, fence.ErrStale):
			refused = append(refused, o)
		default:
			t.Errorf("Write(%q, %d) = %v, want nil or ErrStale", r, o.token, o.err)
		}
	}
	return accepted, refused
}

// violations returns the writes that break the rule: accepted after a
// higher token had been accepted, or refused with no higher token written
// before they returned.
func violations(r string, accepted, refused []op) []string {
	var v []string
	for _, a := range accepted {
		for _, b := range accepted {
			if b.end.Before(a.start) && a.token < b.token {
				v = append(v, fmt.Sprintf("Write(%q, %d) = nil, begun after Write(%q, %d) had returned nil; want ErrStale", r, a.token, r, b.token))
			}
		}
	}
	for _, o := range refused {
		explained := false
		for _, b := range accepted {
			if b.token > o.token && b.start.Before(o.end) {
				explained = true
				break
			}
		}
		if !explained {
			v = append(v, fmt.Sprintf("Write(%q, %d) = ErrStale, but no higher token was written before it returned", r, o.token))
		}
	}
	return v
}
