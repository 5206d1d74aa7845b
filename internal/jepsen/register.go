package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/dlock-go/dlock/fence"
)

// regOp is one operation the register served, in the order it served them.
type regOp struct {
	Seq      int    `json:"seq"`
	Kind     string `json:"kind"` // "read" or "write"
	Worker   int    `json:"worker"`
	Fence    uint64 `json:"fence"`
	Value    int64  `json:"value"` // written, or read
	Accepted bool   `json:"accepted"`
	T        int64  `json:"t"` // CLOCK_MONOTONIC when the register served it
}

// register is the fenced register: an int64 behind a fence.Guard, which
// refuses an operation whose fence is below the highest it has accepted
// and raises it on an accepted one.
type register struct {
	mu    sync.Mutex
	guard fence.Guard
	value int64
	seq   int
	log   *json.Encoder // one line per operation, written before the reply
	// holder is the worker that said it acquired and has not said it
	// released, and its pid; waiting are the workers in Acquire.
	holder, holderPID int
	waiting           map[int]bool
}

func (r *register) serve(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	worker, _ := strconv.Atoi(q.Get("worker"))
	token, _ := strconv.ParseUint(q.Get("fence"), 10, 64)
	value, _ := strconv.ParseInt(q.Get("value"), 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind := q.Get("kind"); kind {
	case "waiting":
		r.waiting[worker] = true
		return
	case "acquired":
		delete(r.waiting, worker)
		r.holder = worker
		r.holderPID, _ = strconv.Atoi(q.Get("pid"))
		return
	case "released":
		if r.holder == worker {
			r.holder, r.holderPID = -1, 0
		}
		return
	case "holder":
		fmt.Fprintf(w, "%d %d", r.holder, r.holderPID)
		return
	case "waiter":
		for n := range r.waiting {
			if n != r.holder {
				fmt.Fprintf(w, "%d", n)
				return
			}
		}
		fmt.Fprintf(w, "-1")
		return
	case "read", "write":
		op := regOp{Seq: r.seq, Kind: kind, Worker: worker, Fence: token, T: now()}
		r.seq++
		err := r.guard.Do(token, func() error {
			if kind == "write" {
				r.value = value
			}
			return nil
		})
		switch {
		case err == nil:
			op.Accepted = true
		case !errors.Is(err, fence.ErrStale):
			http.Error(w, err.Error(), 400)
			return
		}
		if kind == "read" || !op.Accepted {
			op.Value = r.value
		} else {
			op.Value = value
		}
		if err := r.log.Encode(op); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		json.NewEncoder(w).Encode(op)
	default:
		http.Error(w, "unknown kind", 400)
	}
}

// Register is the register's worker (see internal/testworker): args are
// the path of its log. It prints "listening ADDR" and serves until ctx
// ends.
func Register(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("register: want LOG, got %q", args)
	}
	f, err := os.Create(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r := &register{log: json.NewEncoder(f), holder: -1, waiting: map[int]bool{}}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve)}
	fmt.Println("listening", ln.Addr())
	go func() { // exits when ctx ends
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// registerClient talks to the register process.
type registerClient struct {
	addr   string
	worker int
	http   *http.Client
}

func (c *registerClient) do(ctx context.Context, kind string, fence uint64, value int64) (regOp, error) {
	url := fmt.Sprintf("http://%s/?kind=%s&worker=%d&fence=%d&value=%d&pid=%d", c.addr, kind, c.worker, fence, value, os.Getpid())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return regOp{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return regOp{}, err
	}
	defer resp.Body.Close()
	var op regOp
	if kind == "read" || kind == "write" {
		err = json.NewDecoder(resp.Body).Decode(&op)
	}
	return op, err
}
