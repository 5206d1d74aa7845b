package testserver

// PIDs returns the process ids of the running server and of its
// descendants, for tests that measure the server's memory; none if the
// server is not running.
func (s *server) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return nil
	}
	return append([]int{s.proc.pid()}, descendants(s.proc.pid())...)
}

// PIDs returns the process ids of the postmaster and of its backends and
// helper processes; none if the server is not running.
func (p *Postgres) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.proc.exited() {
		return nil
	}
	return append([]int{p.proc.pid()}, descendants(p.proc.pid())...)
}
