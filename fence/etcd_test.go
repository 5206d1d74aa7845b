package fence_test

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
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
			err := s.Write(ctx, key, 5, []byte("new"))
			if err == nil || errors.Is(err, fence.ErrStale) {
				t.Errorf("Write(%q) over a plain value = %v, want an error that is not ErrStale", key, err)
			}
			if _, _, err := s.Read(ctx, key); err == nil {
				t.Errorf("Read(%q) of a plain value = nil error, want an error", key)
			}
		}
	})

	t.Run("NilClient", func(t *testing.T) {
		var nilEtcd fence.Etcd
		if err := nilEtcd.Write(t.Context(), "x", 1, nil); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Write on a zero Etcd = %v, want ErrInvalid", err)
		}
	})
}
