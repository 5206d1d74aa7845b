package fence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// store is what every fenced store in the package offers.
type store interface {
	Write(ctx context.Context, resource string, token uint64, value []byte) error
	Read(ctx context.Context, resource string) ([]byte, uint64, error)
}

// testStore runs the properties every store has. Each subtest uses
// resources of its own, prefixed by prefix so that runs on one server do
// not meet.
func testStore(t *testing.T, s store, prefix string) {
	t.Run("Rule", func(t *testing.T) { testRule(t, s, prefix+"rule") })
	t.Run("InvalidInput", func(t *testing.T) { testInvalid(t, s, prefix+"invalid") })
	t.Run("Names", func(t *testing.T) { testNames(t, s, prefix+"names/") })
	t.Run("Race", func(t *testing.T) { testRace(t, s, prefix+"race") })
}

// TestZeroStores checks that stores without a client refuse to work
// instead of panicking.
func TestZeroStores(t *testing.T) {
	for name, s := range map[string]store{"Redis": &fence.Redis{}, "Etcd": &fence.Etcd{}} {
		if err := s.Write(t.Context(), "x", 1, nil); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Write on a zero %s = %v, want ErrInvalid", name, err)
		}
		if _, _, err := s.Read(t.Context(), "x"); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Read on a zero %s = %v, want ErrInvalid", name, err)
		}
	}
}

// mustWrite writes and fails the test on any error.
func mustWrite(t *testing.T, s store, resource string, token uint64, value string) {
	t.Helper()
	if err := s.Write(t.Context(), resource, token, []byte(value)); err != nil {
		t.Fatalf("Write(%q, %d, %q) = %v, want nil", resource, token, value, err)
	}
}

// wantStored checks what Read returns for resource.
func wantStored(t *testing.T, s store, resource string, token uint64, value string) {
	t.Helper()
	got, gotToken, err := s.Read(t.Context(), resource)
	if err != nil || gotToken != token || string(got) != value {
		t.Fatalf("Read(%q) = %q, %d, %v, want %q, %d, nil", resource, got, gotToken, err, value, token)
	}
}

// wantForeign checks that the store refuses to write or read resource,
// which holds a value the store did not write, and that the refusal is not
// taken for a stale token.
func wantForeign(t *testing.T, s store, resource string) {
	t.Helper()
	err := s.Write(t.Context(), resource, 5, []byte("new"))
	if err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("Write(%q) over a value it did not write = %v, want an error that is not ErrStale", resource, err)
	}
	if _, _, err := s.Read(t.Context(), resource); err == nil {
		t.Errorf("Read(%q) of a value it did not write = nil error, want an error", resource)
	}
}

// testRule checks the rule: a token below the stored one is refused and
// changes nothing; an equal or higher one is accepted.
func testRule(t *testing.T, s store, r string) {
	if got, token, err := s.Read(t.Context(), r); got != nil || token != 0 || err != nil {
		t.Fatalf("Read(%q) before any write = %q, %d, %v, want nil, 0, nil", r, got, token, err)
	}
	mustWrite(t, s, r, 7, "first")
	wantStored(t, s, r, 7, "first")
	mustWrite(t, s, r, 7, "same holder again")
	wantStored(t, s, r, 7, "same holder again")
	mustWrite(t, s, r, 7, "same holder again") // unchanged values (MySQL reports no row changed)
	wantStored(t, s, r, 7, "same holder again")

	err := s.Write(t.Context(), r, 6, []byte("stale"))
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Write(%q, 6) after 7 = %v, want ErrStale", r, err)
	}
	if !strings.Contains(err.Error(), "token 6 is below 7") {
		t.Errorf("Write(%q, 6) after 7 = %q, want it to name both tokens", r, err)
	}
	wantStored(t, s, r, 7, "same holder again")

	mustWrite(t, s, r, 1<<60, "newer") // above 2^53: compared exactly, not as a float
	wantStored(t, s, r, 1<<60, "newer")
	if err := s.Write(t.Context(), r, 1<<60-1, []byte("stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Write(%q, 2^60-1) after 2^60 = %v, want ErrStale", r, err)
	}
	mustWrite(t, s, r, math.MaxInt64, "")
	wantStored(t, s, r, math.MaxInt64, "")

	binary := "\x00\xff\x01 nul and high bytes\x00"
	mustWrite(t, s, r+"/binary", 3, binary)
	wantStored(t, s, r+"/binary", 3, binary)
}

// testInvalid checks that bad input is refused with dlock.ErrInvalid and
// writes nothing.
func testInvalid(t *testing.T, s store, r string) {
	for _, token := range []uint64{0, math.MaxInt64 + 1, math.MaxUint64} {
		if err := s.Write(t.Context(), r, token, []byte("x")); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Write(%q, %d) = %v, want ErrInvalid", r, token, err)
		}
	}
	if err := s.Write(t.Context(), "", 1, []byte("x")); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf(`Write("", 1) = %v, want ErrInvalid`, err)
	}
	wantStored(t, s, r, 0, "")
}

// testNames checks that names are data, never code or key syntax.
func testNames(t *testing.T, s store, prefix string) {
	names := []string{
		`x'; DROP TABLE dlock_fenced; --`,
		`"quoted" and \backslash`,
		"{hash}tag",
		"ünïcødé ✓",
		"*?[glob]",
		strings.Repeat("n", 255-len(prefix)),
	}
	for i, n := range names {
		mustWrite(t, s, prefix+n, uint64(i+1), n)
	}
	for i, n := range names {
		wantStored(t, s, prefix+n, uint64(i+1), n)
	}
}

// op is one write of the race test.
type op struct {
	token      uint64
	start, end time.Time // monotonic
	err        error
}

// testRace runs writers that take increasing tokens from one counter, as
// successive holders of a lock would, and write at once, some of them
// after a pause, while a reader watches. A lower token must never land after a higher one: the stored
// token never decreases, no write is accepted after a write with a higher
// token had been accepted, and every refusal is explained by a higher
// token written before it ended.
func testRace(t *testing.T, s store, r string) {
	const writers, writes = 8, 30
	var (
		next atomic.Uint64
		mu   sync.Mutex
		ops  []op
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	var readerErr error
	var reads int
	reader := sync.WaitGroup{}
	reader.Go(func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, token, err := s.Read(context.Background(), r)
			if err != nil {
				readerErr = fmt.Errorf("Read(%q) = %v, want nil", r, err)
				return
			}
			reads++
			if token < last {
				readerErr = fmt.Errorf("Read(%q) = token %d after %d, want it never to decrease", r, token, last)
				return
			}
			if token != 0 && !bytes.Equal(v, []byte(strconv.FormatUint(token, 10))) {
				readerErr = fmt.Errorf("Read(%q) = %q, %d, want the value written with the token", r, v, token)
				return
			}
			last = token
		}
	})
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
	close(stop)
	reader.Wait()
	if readerErr != nil {
		t.Error(readerErr)
	}

	var accepted, refused []op
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
	var violations []string
	for _, a := range accepted {
		for _, b := range accepted {
			if b.end.Before(a.start) && a.token < b.token {
				violations = append(violations, fmt.Sprintf("Write(%q, %d) = nil, begun after Write(%q, %d) had returned nil; want ErrStale", r, a.token, r, b.token))
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
			violations = append(violations, fmt.Sprintf("Write(%q, %d) = ErrStale, but no higher token was written before it returned", r, o.token))
		}
	}
	for i, v := range violations {
		if i == 5 {
			t.Errorf("... and %d more", len(violations)-i)
			break
		}
		t.Error(v)
	}
	wantStored(t, s, r, writers*writes, strconv.Itoa(writers*writes))
	t.Logf("%d writes: %d accepted, %d refused as stale; %d reads", len(ops), len(accepted), len(refused), reads)
}
