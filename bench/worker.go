package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// workerEnv, when set, makes the benchmark binary a worker: it reads
// hotJobs as JSON lines on stdin, runs each, and writes each hotHalf as a
// JSON line on stdout, until stdin closes.
const workerEnv = "DLOCK_BENCH_WORKER"

func workerMain() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var job hotJob
		if err := json.Unmarshal(in.Bytes(), &job); err != nil {
			return fmt.Errorf("worker: bad job: %w", err)
		}
		run := runHot
		if job.Kind == kindWait {
			run = runWait
		}
		if err := out.Encode(run(job)); err != nil {
			return fmt.Errorf("worker: write result: %w", err)
		}
	}
	return in.Err()
}

// worker is the second process of the hot-name scenario: this binary,
// re-executed with workerEnv set. Its owner is the bench; close ends it.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
	mu  sync.Mutex
}

func startWorker() (*worker, error) {
	cmd, in, out, err := startSelf(workerEnv + "=1")
	if err != nil {
		return nil, err
	}
	return &worker{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out))}, nil
}

// startSelf starts this binary again with env added to its environment,
// its stderr this process's, killed if this process dies; the caller owns
// its stdin and stdout.
func startSelf(env string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the bench
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("start worker process: %w", err)
	}
	return cmd, in, out, nil
}

// run sends job to the worker and waits for its half.
func (w *worker) run(job hotJob) (hotHalf, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := json.Marshal(job)
	if err != nil {
		return hotHalf{}, err
	}
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		return hotHalf{}, fmt.Errorf("send job to worker: %w", err)
	}
	var h hotHalf
	if err := w.out.Decode(&h); err != nil {
		return hotHalf{}, fmt.Errorf("read worker result: %w", err)
	}
	return h, nil
}

// close ends the worker: it exits when its stdin closes.
func (w *worker) close() error {
	w.in.Close()
	return w.cmd.Wait()
}

// ensureWorkers starts worker processes until there are n.
func (b *bench) ensureWorkers(n int) error {
	for len(b.workers) < n {
		w, err := startWorker()
		if err != nil {
			return err
		}
		b.workers = append(b.workers, w)
	}
	return nil
}

// closeWorkers ends every worker process.
func (b *bench) closeWorkers() {
	for _, w := range b.workers {
		w.close()
	}
	b.workers = nil
}
