package etcdlock_test

import (
	"testing"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/fencerule/fencetest"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestFence(t *testing.T) {
	e := testserver.StartEtcd(t)
	client := e.Client(t)
	s := etcdlock.NewFence(client)
	fencetest.Run(t, s, "/fence-test/")

	t.Run("NotAFencedValue", func(t *testing.T) {
		ctx := t.Context()
		for _, v := range []string{"hello", "0000000000000000000x"} {
			key := "/plain/" + v
			if _, err := client.Put(ctx, key, v); err != nil {
				t.Fatalf("Put(%q) = %v, want nil", key, err)
			}
			fencetest.WantForeign(t, s, key)
		}
	})
}

// TestFenceWithoutClient checks that a Fence without a client refuses to
// work instead of panicking.
func TestFenceWithoutClient(t *testing.T) {
	fencetest.WantInvalid(t, etcdlock.NewFence(nil))
	fencetest.WantInvalid(t, &etcdlock.Fence{})
}
