package pause

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !For(t.Context(), time.Second) {
			t.Errorf("For(live ctx, 1s) = false, want true")
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("For(live ctx, 1s) took %v, want 1s", d)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if For(ctx, time.Hour) {
			t.Errorf("For(ctx ending after 100ms, 1h) = true, want false")
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("For returned after %v, want when ctx ended (100ms)", d)
		}
	})
}
