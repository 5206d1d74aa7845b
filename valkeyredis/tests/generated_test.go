package valkeyredis_test

import (
	"testing"

	"github.com/dlock-go/dlock/valkeyredis/internal/gen/rewrite"
)

// TestGeneratedCurrent checks that valkeyredis's Go files are what its
// go generate step writes from rueidisredis's (the adversary: an edit
// made to one adapter and not the other, or by hand to a generated file).
func TestGeneratedCurrent(t *testing.T) {
	stale, err := rewrite.Tree("../../rueidisredis", "..", false)
	if err != nil {
		t.Fatalf("rewrite.Tree = %v", err)
	}
	if len(stale) > 0 {
		t.Errorf("generated files differ from their rueidisredis sources: %v; run go generate in valkeyredis", stale)
	}
}
