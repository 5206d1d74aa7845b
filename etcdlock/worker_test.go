package etcdlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/etcdlock"
)

// workerEnv, when set in the environment, makes the test binary run as a
// lock-holding worker process instead of running tests.
const workerEnv = "DLOCK_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "etcd-holder" {
		os.Exit(holderWorker())
	}
	os.Exit(m.Run())
}

// holderWorker connects to DLOCK_ETCD_ADDR with a session lease of
// DLOCK_ETCD_SESSION, takes the lock DLOCK_ETCD_NAME, prints
// "acquired FENCE" and holds the lock until its standard input closes.
func holderWorker() int {
	ttl, err := time.ParseDuration(os.Getenv("DLOCK_ETCD_SESSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{os.Getenv("DLOCK_ETCD_ADDR")},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	l, err := etcdlock.New(cli, &etcdlock.Options{SessionTTL: ttl})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	k, err := l.TryAcquire(context.Background(), os.Getenv("DLOCK_ETCD_NAME"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	fmt.Printf("acquired %d\n", k.Fence())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startHolder starts a worker process holding name through its own
// session lease and returns it once it holds the lock, with the lock's
// fencing token.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=etcd-holder", "DLOCK_ETCD_ADDR="+addr,
		"DLOCK_ETCD_NAME="+name, "DLOCK_ETCD_SESSION="+session.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var fence uint64
	if _, serr := fmt.Sscanf(strings.TrimSpace(line), "acquired %d", &fence); err != nil || serr != nil {
		t.Fatalf("worker said %q (%v), want \"acquired FENCE\"", line, err)
	}
	return cmd, fence
}
