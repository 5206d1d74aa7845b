package zklock_test

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
)

// A nil connection gives errors wrapping ErrInvalid, not a panic.
func TestNilConn(t *testing.T) {
	l := zklock.New(nil, nil)
	defer l.Close()
	if _, err := l.TryAcquire(t.Context(), "x"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("TryAcquire on a nil *zk.Conn = %v, want ErrInvalid", err)
	}
	if _, err := l.Acquire(t.Context(), "x"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Acquire on a nil *zk.Conn = %v, want ErrInvalid", err)
	}
}
