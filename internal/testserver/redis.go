package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server process started by StartRedis. Its methods are
// meant to be called from the test goroutine, but they are safe for
// concurrent use.
type Redis struct {
	bin  string // path of redis-server
	dir  string // temporary directory holding one subdirectory per run
	port int    // kept across restarts

	server
	runs int // number of times the server has been started
}

// StartRedis starts a standalone redis-server without persistence on a free
// loopback port and waits until it answers PING. The server is killed when
// the test and its subtests have finished, even if the test panics. If
// redis-server is not installed, StartRedis skips the test (see Need).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r := &Redis{bin: Need(t, "redis-server", "redis-server"), dir: t.TempDir()}
	r.server = server{name: "redis-server", where: r.addr, start: r.startLocked}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startLocked(t)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.proc.kill(); err != nil {
			t.Errorf("stop redis-server on %s: %v", r.addr(), err)
		}
	})
	return r
}

// startLocked starts a new, empty server in a fresh directory, on r.port if
// it is set and on a free port otherwise. r.mu must be held.
func (r *Redis) startLocked(t testing.TB) {
	t.Helper()
	r.runs++
	dir := filepath.Join(r.dir, fmt.Sprintf("run%d", r.runs))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create redis-server directory: %v", err)
	}
	args := func(port int) []string { return redisArgs(port, dir) }
	r.proc, r.port = launch(t, r.bin, dir, r.port, false, args, probeRedis)
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (r *Redis) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr()
}

func (r *Redis) addr() string { return redisAddr(r.port) }

// Client returns a new go-redis client for the server, closed when the test
// ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisArgs returns the redis-server command line shared by standalone
// servers and cluster nodes: no persistence, loopback only, logging to
// stdout (which launch sends to server.log).
func redisArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}
}

func redisAddr(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// probeRedis sends PING and INFO server to 127.0.0.1:port and checks that the
// answer is PONG and comes from the process pid, not from another server
// that happens to use the port.
func probeRedis(port, pid int) error {
	conn, err := net.DialTimeout("tcp", redisAddr(port), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = rd.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(rd, info); err != nil {
		return err
	}
	if !strings.Contains("\n"+string(info), "\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("127.0.0.1:%d is served by another process than %d", port, pid)
	}
	return nil
}
