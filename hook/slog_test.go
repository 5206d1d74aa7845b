package hook_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

func TestSlogLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var info, debug bytes.Buffer
		l, err := memlock.New(memlock.NewStore())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.AddHook(hook.Slog(slog.New(slog.NewTextHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo}))))
		l.AddHook(hook.Slog(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		k, err := l.Acquire(t.Context(), "job", dlock.WithTTL(time.Second), dlock.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		<-k.Done()
		synctest.Wait()
		k2, err := l.Acquire(t.Context(), "job")
		if err != nil {
			t.Fatal(err)
		}
		k2.Release(t.Context())

		if got := strings.Count(info.String(), "\n"); got != 1 || !strings.Contains(info.String(), `level=WARN msg="dlock: lock lost" backend=memory name=job`) ||
			!strings.Contains(info.String(), "reason=expired") {
			t.Errorf("Info log = %q, want exactly the loss, at WARN, with its reason", info.String())
		}
		for _, want := range []string{`level=DEBUG msg="dlock: acquiring" backend=memory name=job wait=true mode=exclusive`,
			`msg="dlock: acquire" backend=memory name=job outcome=acquired`, `level=WARN msg="dlock: lock lost"`,
			`level=DEBUG msg="dlock: released" backend=memory name=job`} {
			if !strings.Contains(debug.String(), want) {
				t.Errorf("Debug log lacks %q:\n%s", want, debug.String())
			}
		}
	})
}

// TestSlogEvents calls the Hook's funcs directly with events a Locker on
// memlock does not make: failed renewals, errors, queue positions, modes,
// and a Loss without a cause.
func TestSlogEvents(t *testing.T) {
	var buf bytes.Buffer
	h := hook.Slog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: dropTime,
	})))
	ctx := context.Background()
	start := hook.AcquireStart{Backend: "redis", Name: "n", Limit: 3, TTL: time.Second}
	if got := h.AcquireStart(ctx, start); got != nil {
		t.Errorf("AcquireStart returned %v, want nil (keep the caller's context)", got)
	}
	h.AcquireDone(ctx, hook.AcquireDone{AcquireStart: hook.AcquireStart{Backend: "redis", Name: "n", Shared: true},
		Outcome: hook.AcquireFailed, Err: errors.New("boom"), Ahead: 2})
	h.Reentered(ctx, hook.Reentry{Backend: "redis", Name: "n", Owner: "o", Fence: 7, Handles: 2})
	h.Renewed(hook.Renewal{Backend: "redis", Size: 2, Renewed: 2})
	h.Renewed(hook.Renewal{Backend: "redis", Size: 2, Renewed: 1, Failed: 1, Err: errors.New("timeout")})
	h.Lost(ctx, hook.Loss{Backend: "redis", Name: "n", Reason: hook.LossReported})
	h.Released(ctx, hook.Release{Backend: "redis", Name: "n", Outcome: hook.ReleaseFailed, Err: errors.New("reset")})

	want := []string{
		`level=DEBUG msg="dlock: acquiring" backend=redis name=n wait=false mode="a permit of a semaphore of 3" ttl=1s`,
		`level=DEBUG msg="dlock: acquire" backend=redis name=n outcome=error took=0s attempts=0 contended=false ahead=2 error=boom`,
		`level=DEBUG msg="dlock: re-entered" backend=redis name=n owner=o fence=7 handles=2`,
		`level=DEBUG msg="dlock: renewal" backend=redis size=2 renewed=2 not_held=0 failed=0 took=0s`,
		`level=WARN msg="dlock: renewal" backend=redis size=2 renewed=1 not_held=0 failed=1 took=0s error=timeout`,
		`level=WARN msg="dlock: lock lost" backend=redis name=n owner="" fence=0 reason=reported held=0s`,
		`level=DEBUG msg="dlock: released" backend=redis name=n owner="" fence=0 outcome=error held=0s took=0s closed=false error=reset`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("Slog logged %d records, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %s\nwant         %s", i, got[i], want[i])
		}
	}
}

// TestSlogNil checks that Slog(nil) logs to slog.Default.
func TestSlogNil(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})))
	hook.Slog(nil).Lost(context.Background(), hook.Loss{Backend: "memory", Name: "n", Cause: dlock.ErrLost})
	if want := `level=WARN msg="dlock: lock lost" backend=memory name=n`; !strings.Contains(buf.String(), want) ||
		!strings.Contains(buf.String(), "cause=") {
		t.Errorf("Slog(nil) logged %q, want a record with %q and its cause on slog.Default", buf.String(), want)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
