package hook_test

import (
	"fmt"
	"testing"

	"github.com/dlock-go/dlock/hook"
)

// TestLabels checks that every outcome and reason names itself with the
// metric label the adapters export, distinct within its type.
func TestLabels(t *testing.T) {
	cases := []struct {
		v    fmt.Stringer
		want string
	}{
		{hook.Acquired, "acquired"},
		{hook.NotAcquired, "not_acquired"},
		{hook.Canceled, "canceled"},
		{hook.AcquireFailed, "error"},
		{hook.LossExpired, "expired"},
		{hook.LossNotHeld, "not_held"},
		{hook.LossReported, "reported"},
		{hook.Released, "released"},
		{hook.ReleaseNotHeld, "not_held"},
		{hook.ReleaseFailed, "error"},
	}
	for _, c := range cases {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T(%d).String() = %q, want %q", c.v, c.v, got, c.want)
		}
	}
}
