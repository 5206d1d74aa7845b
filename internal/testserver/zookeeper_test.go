package testserver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/testserver"
)

func TestZooKeeper(t *testing.T) {
	start := time.Now()
	z := testserver.StartZooKeeper(t)
	t.Logf("zookeeper ready in %v", time.Since(start))
	c := z.Conn(t, 2*time.Second)
	znodes, zxid := z.MntrInt(t, "zk_znode_count"), z.Zxid(t)
	if _, err := c.Create("/k", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/k) = %v", err)
	}
	if n := z.MntrInt(t, "zk_znode_count"); n != znodes+1 {
		t.Errorf("MntrInt(zk_znode_count) after a create = %d, want %d", n, znodes+1)
	}
	if n := z.Zxid(t); n != zxid+1 {
		t.Errorf("Zxid() after a create = %d, want %d", n, zxid+1)
	}

	z.Pause(t)
	quick := func() error { _, _, err := c.Exists("/k"); return err }
	done := make(chan error, 1)
	go func() { done <- quick() }()
	select {
	case err := <-done:
		t.Fatalf("Exists on a paused server returned %v, want it to wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	z.Resume(t)
	if err := <-done; err != nil {
		t.Fatalf("Exists after Resume = %v, want nil", err)
	}

	// Data survives a restart; a killed server refuses connections.
	start = time.Now()
	z.Restart(t)
	t.Logf("zookeeper restarted in %v", time.Since(start))
	c2 := z.Conn(t, 2*time.Second)
	if v, _, err := c2.Get("/k"); err != nil || string(v) != "v" {
		t.Fatalf("Get(/k) after Restart = %q, %v; want \"v\", nil", v, err)
	}
	z.Kill(t)
	c3, _, err := zk.Connect([]string{z.Addr()}, time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, _, err := c3.Exists("/k"); !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("Exists on a killed server = %v, want ErrNoServer or ErrConnectionClosed", err)
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// With ContainerCheck, an emptied container znode goes within seconds.
func TestZooKeeperContainerCheck(t *testing.T) {
	z := testserver.StartZooKeeper(t, testserver.ContainerCheck(100*time.Millisecond))
	c := z.Conn(t, 2*time.Second)
	if _, err := c.CreateContainer("/c", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("CreateContainer(/c) = %v", err)
	}
	if _, err := c.Create("/c/k", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create(/c/k) = %v", err)
	}
	if err := c.Delete("/c/k", -1); err != nil {
		t.Fatalf("Delete(/c/k) = %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, _, err := c.Exists("/c")
		if err != nil {
			t.Fatalf("Exists(/c) = %v", err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Exists(/c) = true 30 s after its last child went, want the server to delete the empty container")
		}
	}
}
