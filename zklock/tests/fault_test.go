package zklock_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testkit"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/zklock"
)

// faultSession is the session timeout of the connections whose sessions
// the fault tests let expire.
const faultSession = 2 * time.Second

// freezer makes the connections it dialled silent: while frozen, their
// writes are dropped, their reads deliver nothing, and new dials fail, as
// in a network partition.
type freezer struct {
	mu      sync.Mutex
	frozen  bool
	refused bool       // dials fail
	conns   []net.Conn // dialled so far
	// loseMulti, if not nil, is closed when the next multi request
	// (dlock's create) has been sent: f freezes as it sends it, so that
	// the server runs the request and its reply is lost.
	loseMulti chan struct{}
}

// cut closes every connection it dialled and refuses new ones until
// restore, as when a server's process restarts.
func (f *freezer) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = true
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *freezer) restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = false
}

func (f *freezer) set(frozen bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = frozen
}

func (f *freezer) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *freezer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	refused := f.frozen || f.refused
	f.mu.Unlock()
	if refused {
		return nil, errors.New("partitioned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	return &frozenConn{Conn: c, f: f}, nil
}

type frozenConn struct {
	net.Conn
	f *freezer
}

func (c *frozenConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.f.isFrozen() {
			return n, err
		}
	}
}

func (c *frozenConn) Write(b []byte) (int, error) {
	if c.f.isFrozen() {
		return len(b), nil
	}
	// A request is its length, xid and opcode (4 bytes each), then its
	// body, in one Write; 14 is a multi's opcode.
	c.f.mu.Lock()
	lost := c.f.loseMulti
	if lost == nil || len(b) < 12 || binary.BigEndian.Uint32(b[8:12]) != 14 {
		c.f.mu.Unlock()
		return c.Conn.Write(b)
	}
	c.f.frozen = true // before the write: its reply is dropped
	c.f.loseMulti = nil
	c.f.mu.Unlock()
	n, err := c.Conn.Write(b)
	close(lost)
	return n, err
}

// connect returns a connection through f once it has a session.
func connect(t *testing.T, addr string, session time.Duration, f *freezer) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, session, zk.WithDialer(zklock.BoundedDialer(session, f.dial)), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-timeout:
			t.Fatalf("no session with %s", addr)
		}
	}
}

func TestFaults(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	conn := z.Conn(t, sessionTimeout)

	// The holder's connection goes silent; the server expires its session
	// after the session timeout. The holder's Done closes before that, and
	// the next waiter gets the lock once the session is gone.
	t.Run("SessionExpired", func(t *testing.T) {
		name := "expired/" + t.Name()
		f := &freezer{}
		hconn := connect(t, z.Addr(), faultSession, f)
		holder, waiter := newLocker(t, hconn), newLocker(t, conn)
		k, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		got := testkit.AcquireAsync(t.Context(), waiter, name)
		testkit.WantWaiting(t, got, name)
		session := hconn.SessionID()
		f.set(true)
		frozen := time.Now()
		select {
		case <-k.Done():
		case <-time.After(faultSession + 2*time.Second):
			t.Fatalf("holder's Done still open %v after its connection went silent", faultSession+2*time.Second)
		}
		lostAt := time.Now()
		if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("context.Cause = %v, want ErrLost", cause)
		}
		r := testkit.WantAcquired(t, got, name, faultSession+5*time.Second)
		t.Logf("Done closed %v and the waiter acquired %v after the partition", lostAt.Sub(frozen), r.At.Sub(frozen))
		if r.At.Before(lostAt) {
			t.Errorf("the waiter acquired %v before the holder's Done closed", lostAt.Sub(r.At))
		}
		if r.Lock.Fence() <= k.Fence() {
			t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), k.Fence())
		}
		f.set(false)
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Release of the lost lock = %v, want ErrNotHeld", err)
		}
		if err := r.Lock.Release(t.Context()); err != nil {
			t.Errorf("waiter's Release = %v", err)
		}
		// The holder's connection gets a new session and works again.
		deadline := time.Now().Add(10 * time.Second)
		for hconn.State() != zk.StateHasSession || hconn.SessionID() == session {
			if time.Now().After(deadline) {
				t.Fatalf("holder's connection has no new session after the partition")
			}
			time.Sleep(20 * time.Millisecond)
		}
		k2, err := holder.TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) on the new session = %v", name, err)
		}
		if err := k2.Release(t.Context()); err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	// A connection lost briefly ends the locks held through it at once by
	// default, and not before Options.SuspendTimeout when it is set. (The
	// zk client redials a lone server a second after losing it.)
	t.Run("ShortDisconnect", func(t *testing.T) {
		name := "short/" + t.Name()
		f := &freezer{}
		hconn := connect(t, z.Addr(), sessionTimeout, f)
		strict := newLocker(t, hconn)
		tolerant := newLockerOpts(t, hconn, &zklock.Options{SuspendTimeout: 3 * time.Second})
		ks, err := strict.TryAcquire(t.Context(), name+"-strict")
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
		kt, err := tolerant.TryAcquire(t.Context(), name+"-tolerant")
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
		session := hconn.SessionID()
		f.cut()
		select {
		case <-ks.Done():
		case <-time.After(time.Second):
			t.Fatalf("Done still open 1s after the connection was lost, want closed at once")
		}
		time.Sleep(200 * time.Millisecond)
		f.restore()
		deadline := time.Now().Add(10 * time.Second)
		for hconn.State() != zk.StateHasSession {
			if time.Now().After(deadline) {
				t.Fatalf("no session after the connection came back")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if hconn.SessionID() != session {
			t.Fatalf("the session changed across a short disconnection")
		}
		if testkit.IsClosed(kt.Done()) {
			t.Fatalf("Done with SuspendTimeout 3s closed after a short disconnection (%v)", context.Cause(kt.Context()))
		}
		if err := kt.Refresh(t.Context()); err != nil {
			t.Errorf("Refresh after the disconnection = %v, want nil", err)
		}
		if err := kt.Release(t.Context()); err != nil {
			t.Errorf("Release = %v", err)
		}
		// The lost lock's child is deleted once the connection is back.
		sessionlocktest.WaitEntries(t, queueOn(nil, conn), name+"-strict", 0)
	})

	// A holder process killed with SIGKILL keeps its lock until the server
	// expires its session; then the next waiter gets it.
	t.Run("HolderKilled", func(t *testing.T) {
		name := "killed/" + t.Name()
		cmd, fence := startHolder(t, z.Addr(), name, faultSession)
		waiter := newLocker(t, conn)
		got := testkit.AcquireAsync(t.Context(), waiter, name)
		testkit.WantWaiting(t, got, name)
		cmd.Kill(t)
		killed := time.Now()
		r := testkit.WantAcquired(t, got, name, 2*faultSession+5*time.Second)
		d := r.At.Sub(killed)
		t.Logf("the waiter acquired %v after the holder was killed (session timeout %v)", d, faultSession)
		// The server last heard from the holder at most a third of the
		// session timeout (its ping interval) before the kill.
		if d < faultSession/2 {
			t.Errorf("the waiter acquired %v after the kill, before the holder's %v session can have expired", d, faultSession)
		}
		if r.Lock.Fence() <= fence {
			t.Errorf("waiter's Fence = %d, want > %d", r.Lock.Fence(), fence)
		}
		if err := r.Lock.Release(t.Context()); err != nil {
			t.Errorf("Release = %v", err)
		}
	})

	// The server dies and comes back over its data while waiters queue:
	// the holder's Done closes, and the waiters then get the lock one at a
	// time, in order.
	t.Run("ServerRestart", func(t *testing.T) {
		const session = 8 * time.Second // outlives the restart
		name := "restart/" + t.Name()
		var lockers []*dlock.Locker
		for range 3 {
			lockers = append(lockers, newLocker(t, connect(t, z.Addr(), session, &freezer{})))
		}
		k, err := lockers[0].TryAcquire(t.Context(), name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) = %v", name, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		got1 := testkit.AcquireAsync(ctx, lockers[1], name)
		sessionlocktest.WaitEntries(t, queueOn(nil, conn), name, 2)
		got2 := testkit.AcquireAsync(ctx, lockers[2], name)
		sessionlocktest.WaitEntries(t, queueOn(nil, conn), name, 3)

		z.Kill(t)
		killed := time.Now()
		select {
		case <-k.Done():
			t.Logf("holder's Done closed %v after the server was killed", time.Since(killed))
		case <-time.After(3 * time.Second):
			t.Fatalf("holder's Done still open 3s after the server was killed")
		}
		lostAt := time.Now()
		testkit.WantWaiting(t, got1, name)
		z.Restart(t)

		r1 := testkit.WantAcquired(t, got1, name, 20*time.Second)
		if r1.At.Before(lostAt) {
			t.Errorf("first waiter acquired before the holder's Done closed")
		}
		if r1.Lock.Fence() <= k.Fence() {
			t.Errorf("first waiter's Fence = %d, want > %d", r1.Lock.Fence(), k.Fence())
		}
		testkit.WantWaiting(t, got2, name)
		if err := r1.Lock.Release(t.Context()); err != nil {
			t.Errorf("first waiter's Release = %v", err)
		}
		r2 := testkit.WantAcquired(t, got2, name, 5*time.Second)
		if r2.Lock.Fence() <= r1.Lock.Fence() {
			t.Errorf("second waiter's Fence = %d, want > %d", r2.Lock.Fence(), r1.Lock.Fence())
		}
		if err := r2.Lock.Release(t.Context()); err != nil {
			t.Errorf("second waiter's Release = %v", err)
		}
		if err := k.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Release of the lock lost in the restart = %v, want ErrNotHeld", err)
		}
	})
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// startHolder starts a worker process holding name through its own session
// and returns it once it holds the lock, with the lock's fencing token.
// The lease is long: only the session's end frees the lock.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*testworker.Process, uint64) {
	t.Helper()
	return testworker.StartHolder(t, fmt.Sprintf("zk://%s?session_timeout=%s", addr, session), name, time.Minute)
}
