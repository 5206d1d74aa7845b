package etcdlock_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// A job handed on: the adversary is the first holder, a process that
// still runs and renews while another process resumes its hold and
// releases it. The facts, in order: the Resume succeeds; the worker's
// Done closes afterwards (at its next renewal); its Release gets
// ErrNotHeld and frees nothing of anyone's.
func TestResumeAcrossProcesses(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	name := "resume/" + t.Name()
	p, tok := testworker.StartTokenHold(t, "etcd://"+e.Addr(), name, 3*time.Second, 0)
	l, other := newLocker(t, cli, nil), newLocker(t, cli, nil)

	before := time.Now()
	r, err := l.Resume(t.Context(), tok)
	if err != nil {
		t.Fatalf("Resume(the worker's token) = %v", err)
	}
	testkit.WantNotAcquired(t, other, name, "after Resume, while the worker runs")
	testkit.MustRelease(t, r)

	if lostAt, _ := testworker.ExpectLost(t, p, 10*time.Second); lostAt.Before(before) {
		t.Errorf("the worker's Done closed %v before Resume was called", before.Sub(lostAt))
	} else {
		t.Logf("the worker's Done closed %v after Resume was called (its TTL: 3s, renewed every 1s)", lostAt.Sub(before))
	}
	if notHeld, err := testworker.ExpectRelease(t, p, 10*time.Second); !notHeld {
		t.Errorf("the worker's Release after Resume = %s, want ErrNotHeld", err)
	}
	if err := p.Wait(t, 10*time.Second); err != nil {
		t.Errorf("worker exited with %v", err)
	}
	testkit.MustRelease(t, testkit.MustTryAcquire(t, other, name))
}

// Storage that checks no tokens, behind a holder killed with SIGKILL (the
// adversary): the name stays taken for the lock-delay after the lease the
// holder could still have trusted, and Inspect shows it Delayed meanwhile.
// A holder that releases cleanly frees the name at once.
func TestLockDelayAfterKill(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	const ttl, delay = time.Second, 3 * time.Second
	waiter := newLocker(t, cli, nil)

	name := "delay/" + t.Name()
	p, _ := testworker.StartTokenHold(t, "etcd://"+e.Addr(), name, ttl, delay)
	got := testkit.AcquireAsync(t.Context(), waiter, name)
	testkit.WantWaiting(t, got, name)
	p.Kill(t)
	killed := time.Now()
	a, sawDelayed := waitAcquired(t, waiter, got, name, 30*time.Second)
	waited := a.At.Sub(killed)
	// The holder's key is on a session lease of 1.5×(TTL+delay)+2 s = 8 s,
	// kept alive every third of it: its last keep-alive landed at most 8/3 s
	// before the kill, so the name is free no earlier than 16/3 s after it,
	// above TTL+delay.
	if waited < ttl+delay {
		t.Errorf("the name was taken %v after the holder was killed, before TTL+delay = %v", waited, ttl+delay)
	}
	if !sawDelayed {
		t.Errorf("Inspect never showed the dead holder Delayed before the name was taken")
	}
	t.Logf("killed holder (TTL %v, lock-delay %v): the next acquisition came %v after the kill", ttl, delay, waited)
	testkit.MustRelease(t, a.Lock)

	clean := name + "-released"
	const long = 30 * time.Second
	p2, _ := testworker.StartTokenHold(t, "etcd://"+e.Addr(), clean, ttl, long)
	got2 := testkit.AcquireAsync(t.Context(), waiter, clean)
	testkit.WantWaiting(t, got2, clean)
	p2.Signal(t, syscall.SIGTERM)
	stopped := time.Now()
	if err := p2.Wait(t, 10*time.Second); err != nil {
		t.Errorf("worker's Release = %v", err)
	}
	a2 := testkit.WantAcquired(t, got2, clean, long)
	if d := a2.At.Sub(stopped); d >= long {
		t.Errorf("after a clean release the name was taken %v later, not before the lock-delay %v", d, long)
	} else {
		t.Logf("clean release (lock-delay %v): the next acquisition came %v after the signal", long, d)
	}
	testkit.MustRelease(t, a2.Lock)
}

// waitAcquired waits up to limit for the acquisition got and reports
// whether Inspect showed name's holder Delayed while it waited.
func waitAcquired(t *testing.T, l *dlock.Locker, got <-chan testkit.Acquired, name string, limit time.Duration) (testkit.Acquired, bool) {
	t.Helper()
	seen := false
	timeout := time.After(limit)
	for {
		select {
		case a := <-got:
			if a.Err != nil {
				t.Fatalf("Acquire(%q) = %v", name, a.Err)
			}
			return a, seen
		case <-timeout:
			t.Fatalf("Acquire(%q) still waiting after %v", name, limit)
		case <-time.After(200 * time.Millisecond):
			infos, err := l.Inspect(t.Context(), name)
			if err == nil && len(infos) == 1 && infos[0].Delayed {
				seen = true
			}
		}
	}
}
