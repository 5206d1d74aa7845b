package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server process the benchmark starts for itself:
// no persistence, loopback only, a temporary directory, killed by stop.
// It follows internal/testserver, which takes a testing.TB and cannot be
// imported from this module.
type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	done chan struct{} // closed when the process has exited
}

// startRedis starts bin on a free loopback port and waits until it
// answers PING. It tries three ports in case one is taken meanwhile.
func startRedis(bin string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found (apt-get install redis-server): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "dlock-bench-redis-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s, err := launchRedis(path, dir, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start %s: %w", path, last)
}

func launchRedis(path, dir string, port int) (*redisServer, error) {
	log, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(path,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group (Ctrl-C goes to the benchmark, which cleans up);
	// killed if the benchmark dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &redisServer{cmd: cmd, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{})}
	go func() { // exits when the server does
		cmd.Wait()
		close(s.done)
	}()
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if parseInfo(info)["process_id"] != strconv.Itoa(cmd.Process.Pid) {
				s.kill()
				return nil, fmt.Errorf("%s is served by another process", s.addr)
			}
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("redis-server exited during startup on %s (see %s)", s.addr, log.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("redis-server on %s did not answer within 10s: %w", s.addr, err)
		}
	}
}

func (s *redisServer) kill() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redis-server %d still running after SIGKILL", s.cmd.Process.Pid)
	}
}

// stop kills the server and removes its directory.
func (s *redisServer) stop() error {
	err := s.kill()
	return errors.Join(err, os.RemoveAll(s.dir))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
