package etcdlock_test

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
)

// A nil client gives an error wrapping ErrInvalid, not a panic.
func TestNilClient(t *testing.T) {
	if l, err := etcdlock.New(nil, nil); !errors.Is(err, dlock.ErrInvalid) || l != nil {
		t.Errorf("New(nil, nil) = %v, %v; want nil, ErrInvalid", l, err)
	}
}
