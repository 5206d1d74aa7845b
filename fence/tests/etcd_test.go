package fence_test

import (
	"testing"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestEtcd(t *testing.T) {
	e := testserver.StartEtcd(t)
	client := e.Client(t)
	s := fence.NewEtcd(client)
	testStore(t, s, "/fence-test/")

	t.Run("NotAFencedValue", func(t *testing.T) {
		ctx := t.Context()
		for _, v := range []string{"hello", "0000000000000000000x"} {
			key := "/plain/" + v
			if _, err := client.Put(ctx, key, v); err != nil {
				t.Fatalf("Put(%q) = %v, want nil", key, err)
			}
			wantForeign(t, s, key)
		}
	})
}
