package testserver

import (
	"sync"
	"syscall"
	"testing"
)

// server is what the test servers share: their current process, replaced
// by Restart, and the faults tests inject. Each server type embeds it,
// sets name, where and start, and guards its own fields with mu too.
type server struct {
	name  string             // the program, for messages
	where func() string      // the server's address, for messages; called with mu held
	start func(t testing.TB) // starts a new process into proc; called with mu held

	mu   sync.Mutex
	proc *process // the current (or last) server process
}

// startAndStop starts the server's first process, under mu, and kills
// the server when the test ends.
func (s *server) startAndStop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	s.start(t)
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.proc.kill(); err != nil {
			t.Errorf("stop %s on %s: %v", s.name, s.where(), err)
		}
	})
}

// Kill kills the server with SIGKILL and waits until it has exited.
// Killing a server that is not running does nothing.
func (s *server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(); err != nil {
		t.Fatalf("kill %s on %s: %v", s.name, s.where(), err)
	}
}

// Pause stops the server with SIGSTOP and returns once every thread of it
// has stopped. It keeps accepting TCP connections (the kernel queues
// them) but answers nothing until Resume.
func (s *server) Pause(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause %s on %s: %v", s.name, s.where(), err)
	}
	if err := waitStopped(s.proc.pid()); err != nil {
		t.Fatalf("pause %s on %s: %v", s.name, s.where(), err)
	}
}

// Resume continues a server stopped by Pause with SIGCONT.
func (s *server) Resume(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume %s on %s: %v", s.name, s.where(), err)
	}
}

// Restart kills the server with SIGKILL if it is running and starts it
// again on the same address (see each server type for what survives). It
// returns once the new server answers.
func (s *server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(); err != nil {
		t.Fatalf("kill %s on %s: %v", s.name, s.where(), err)
	}
	s.start(t)
}
