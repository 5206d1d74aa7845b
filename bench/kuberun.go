package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/kubelock"
)

// kubeHolderEnv, when set to a kubeHolderJob as JSON, makes the benchmark
// binary a holder of the Kubernetes section: it claims the Lease, writes
// "led" on stdout once it leads, and holds (renewing) until it is killed
// or its stdin closes.
const kubeHolderEnv = "DLOCK_BENCH_KUBE_HOLDER"

// kubeOnly runs the Kubernetes section alone.
var kubeOnly = flag.Bool("kube-only", false, "run only the Kubernetes section, print its table on stdout and write no report")

// kubeHolderJob is what a holder process claims, and how.
type kubeHolderJob struct {
	Key, Kubeconfig, Name, Identity string
}

func kubeHolderMain() error {
	quietKlog()
	var job kubeHolderJob
	if err := json.Unmarshal([]byte(os.Getenv(kubeHolderEnv)), &job); err != nil {
		return fmt.Errorf("kube holder: bad job: %w", err)
	}
	k, ok := kubeLibByKey(job.Key)
	if !ok {
		return fmt.Errorf("kube holder: no library %q", job.Key)
	}
	c, err := k.contend(job.Kubeconfig, job.Name, job.Identity)
	if err != nil {
		return fmt.Errorf("kube holder: %w", err)
	}
	if err := c.waitLed(k.patience()); err != nil {
		return fmt.Errorf("kube holder: %w", err)
	}
	fmt.Println("led")
	io.Copy(io.Discard, os.Stdin) // until the bench closes it (or kills this process)
	c.stop()
	return nil
}

func kubeLibByKey(key string) (kubeLib, bool) {
	for _, k := range kubeLibs {
		if k.key == key {
			return k, true
		}
	}
	return kubeLib{}, false
}

// kubeHolder is a holder process. Its owner kills it, then calls wait.
type kubeHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open (a collected pipe would close): the holder holds until killed
}

func (h *kubeHolder) wait() {
	h.cmd.Wait()
	h.stdin.Close()
}

// startKubeHolder runs a holder process for k on the Lease name and
// returns once it leads.
func startKubeHolder(k kubeLib, kubeconfig, name string) (*kubeHolder, error) {
	job, err := json.Marshal(kubeHolderJob{Key: k.key, Kubeconfig: kubeconfig, Name: name, Identity: "holder"})
	if err != nil {
		return nil, err
	}
	cmd, stdin, out, err := startSelf(kubeHolderEnv + "=" + string(job))
	if err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() { // exits at the holder's first line or end of output
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
	}()
	select {
	case l := <-line:
		if l == "led" {
			return &kubeHolder{cmd: cmd, stdin: stdin}, nil
		}
	case <-time.After(k.patience()):
	}
	cmd.Process.Kill()
	cmd.Wait()
	stdin.Close()
	return nil, errors.New("holder process did not lead")
}

// kubeTakeover measures one takeover: a holder process leads name, a
// waiter of the same library in this process waits for it, and the
// holder is killed with SIGKILL; the figure is from the kill to the
// waiter's leading.
func kubeTakeover(k kubeLib, kubeconfig, name string) (time.Duration, error) {
	holder, err := startKubeHolder(k, kubeconfig, name)
	if err != nil {
		return 0, err
	}
	defer holder.wait()
	w, err := k.contend(kubeconfig, name, "waiter")
	if err != nil {
		holder.cmd.Process.Kill()
		return 0, err
	}
	defer w.stop()
	time.Sleep(k.settle())
	t0 := time.Now()
	if err := holder.cmd.Process.Kill(); err != nil {
		return 0, err
	}
	if err := w.waitLed(k.patience()); err != nil {
		return 0, err
	}
	return w.ledAt.Sub(t0), nil
}

// kubeHandoff measures one handoff in this process: a holder leads name,
// a waiter (a clientset of its own) waits, and the holder releases (dlock
// Release; client-go's ReleaseOnCancel). It returns the time from the
// release call to the waiter's leading, and the requests both sent from
// the waiter's start to its leading.
func kubeHandoff(k kubeLib, kubeconfig, name string) (time.Duration, int64, error) {
	h, err := k.contend(kubeconfig, name, "holder")
	if err != nil {
		return 0, 0, err
	}
	if err := h.waitLed(k.patience()); err != nil {
		h.stop()
		return 0, 0, err
	}
	base := h.requests.Load()
	w, err := k.contend(kubeconfig, name, "waiter")
	if err != nil {
		h.stop()
		return 0, 0, err
	}
	defer w.stop()
	time.Sleep(k.settle())
	t0 := time.Now()
	h.stop()
	if err := w.waitLed(k.patience()); err != nil {
		return 0, 0, err
	}
	return w.ledAt.Sub(t0), h.requests.Load() - base + w.atLed, nil
}

// kubeCycle takes and gives up the free Lease name once, alone, and
// returns the time to lead and the requests of the whole cycle.
func kubeCycle(k kubeLib, kubeconfig, name string) (time.Duration, int64, error) {
	t0 := time.Now()
	c, err := k.contend(kubeconfig, name, "alone")
	if err != nil {
		return 0, 0, err
	}
	err = c.waitLed(k.patience())
	c.stop()
	if err != nil {
		return 0, 0, err
	}
	return c.ledAt.Sub(t0), c.requests.Load(), nil
}

// Metrics of the Kubernetes section.
const (
	mKubeTakeover = "kube_takeover"
	mKubeHandoff  = "kube_handoff"
	mKubeHandReqs = "kube_handoff_requests"
	mKubeCycle    = "kube_cycle"
	mKubeCycReqs  = "kube_cycle_requests"
)

// runKube starts an apiserver and runs the section's rounds: in each, a
// takeover, a handoff and an uncontended cycle per library, interleaved.
func (b *bench) runKube() {
	quietKlog()
	tb := &harnessTB{}
	defer tb.cleanup()
	b.progress("kube-apiserver %s and its etcd (dlock's test harness)", testserver.KubeVersion)
	var kubeconfig string
	_, err := tb.run(func(t testing.TB) string {
		k := testserver.StartKube(t)
		k.GrantLeases(t, kubeNamespace)
		kubeconfig = k.WriteKubeconfig(t, testserver.KubeUser, "", kubeNamespace)
		return ""
	})
	if err != nil {
		b.kubeErr = err
		b.errorf("kube: %v", err)
		return
	}
	for _, k := range kubeLibs { // creates each library's cycle Lease, uncounted
		if _, _, err := kubeCycle(k, kubeconfig, "bench-cycle-"+k.key); err != nil {
			b.errorf("kube cycle %s warm-up: %v", k.key, err)
		}
	}
	for r := range b.cfg.kubeRounds {
		for _, k := range kubeLibs {
			b.progress("kube %d/%d: %s: takeover after kill -9, handoff, uncontended", r+1, b.cfg.kubeRounds, k.label)
			b.kubeRound(k, kubeconfig, r)
		}
	}
}

func (b *bench) kubeRound(k kubeLib, kubeconfig string, r int) {
	d, err := kubeTakeover(k, kubeconfig, fmt.Sprintf("bench-takeover-%s-%d", k.key, r))
	if err != nil {
		b.errorf("kube takeover %s round %d: %v", k.key, r, err)
	} else {
		b.kube.add(k.key, mKubeTakeover, float64(d))
	}
	d, n, err := kubeHandoff(k, kubeconfig, fmt.Sprintf("bench-handoff-%s-%d", k.key, r))
	if err != nil {
		b.errorf("kube handoff %s round %d: %v", k.key, r, err)
	} else {
		b.kube.add(k.key, mKubeHandoff, float64(d))
		b.kube.add(k.key, mKubeHandReqs, float64(n))
	}
	d, n, err = kubeCycle(k, kubeconfig, "bench-cycle-"+k.key)
	if err != nil {
		b.errorf("kube cycle %s round %d: %v", k.key, r, err)
	} else {
		b.kube.add(k.key, mKubeCycle, float64(d))
		b.kube.add(k.key, mKubeCycReqs, float64(n))
	}
}

// writeKube renders the Kubernetes section.
func (b *bench) writeKube(p func(string, ...any)) {
	p("## 9. Kubernetes: kubelock beside client-go's leader election (issue 30)\n\n")
	if b.kubeErr != nil {
		p("Not run: %v\n\n", b.kubeErr)
		return
	}
	p("One kube-apiserver %s over its own etcd (dlock's test harness), on loopback; both libraries as the least-privileged user, through clientsets with the same rate limit (%d/s, bursts of %d). %d round(s), the libraries interleaved in each; every cell is median (min–max) across rounds.\n\n",
		testserver.KubeVersion, kubelock.URLQPS, kubelock.URLBurst, b.cfg.kubeRounds)
	p("| library | takeover after kill -9 of the holder | handoff: release to next leader | requests per handoff | uncontended: time to lead | requests per uncontended acquire + release |\n|---|---:|---:|---:|---:|---:|\n")
	for _, k := range kubeLibs {
		p("| %s | %s | %s | %s | %s | %s |\n", k.label, b.kube.get(k.key, mKubeTakeover).format(fDur), b.kube.get(k.key, mKubeHandoff).format(fDur),
			b.kube.get(k.key, mKubeHandReqs).format(fInt), b.kube.get(k.key, mKubeCycle).format(fDur), b.kube.get(k.key, mKubeCycReqs).format(fInt))
	}
	p("\n- *takeover*: a holder process leads the Lease, a waiter of the same library in the benchmark's process has run for max(1 s, 2×RetryPeriod), then the holder gets SIGKILL; from the kill to the waiter's leading. dlock's waiter takes over once it has seen the Lease's resourceVersion unchanged for its `leaseDurationSeconds` (⌈TTL⌉ + 1 s), client-go's once its record has not changed for LeaseDuration, seen at its RetryPeriod polls.\n")
	p("- *handoff*: both in the benchmark's process, each with a clientset of its own; from the holder's release call (dlock `Release`; client-go: cancelling the elector's context with `ReleaseOnCancel`) to the waiter's leading. dlock's waiter is woken by its watch of the Lease; client-go's polls every RetryPeriod (with jitter up to 1.2×).\n")
	p("- *requests*: HTTP requests the clientsets sent (a counting `http.RoundTripper`; a watch counts once). Per handoff: both sides' from the waiter's start to its leading, so they include the holder's renewals in the wait (dlock every TTL/3, client-go every RetryPeriod) and client-go's polls. Per uncontended acquire + release: one process takes the free Lease (created by a warm-up cycle before the rounds) and gives it up.\n\n")
}
