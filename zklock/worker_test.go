package zklock_test

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

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/zklock"
)

// workerEnv, when set in the environment, makes the test binary run as a
// lock-holding worker process instead of running tests.
const workerEnv = "DLOCK_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "zk-holder" {
		os.Exit(holderWorker())
	}
	os.Exit(m.Run())
}

// holderWorker connects to DLOCK_ZK_ADDR with session timeout
// DLOCK_ZK_SESSION, takes the lock DLOCK_ZK_NAME, prints "acquired FENCE"
// and holds the lock until its standard input closes.
func holderWorker() int {
	st, err := time.ParseDuration(os.Getenv("DLOCK_ZK_SESSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	conn, events, err := zk.Connect([]string{os.Getenv("DLOCK_ZK_ADDR")}, st, zk.WithLogger(quiet{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	l := zklock.New(conn, nil)
	k, err := l.TryAcquire(context.Background(), os.Getenv("DLOCK_ZK_NAME"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	fmt.Printf("acquired %d\n", k.Fence())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// startHolder starts a worker process holding name through its own session
// and returns it once it holds the lock, with the lock's fencing token.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=zk-holder", "DLOCK_ZK_ADDR="+addr,
		"DLOCK_ZK_NAME="+name, "DLOCK_ZK_SESSION="+session.String())
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
