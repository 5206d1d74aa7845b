package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
)

// regOp is one operation the register served, in the order it served them.
type regOp struct {
	Seq      int    `json:"seq"`
	Kind     string `json:"kind"` // "read" or "write"
	Worker   int    `json:"worker"`
	Fence    uint64 `json:"fence"`
	Value    int64  `json:"value"` // written, or read
	Accepted bool   `json:"accepted"`
}

// register is the fenced register: an int64 and the highest fence it has
// accepted. An operation whose fence is below that is refused; an
// accepted one raises it.
type register struct {
	mu    sync.Mutex
	value int64
	fence uint64
	seq   int
	log   *json.Encoder // one line per operation, written before the reply
	// holder is the last worker that said it acquired, and its pid.
	holder, holderPID int
}

func (r *register) serve(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	worker, _ := strconv.Atoi(q.Get("worker"))
	fence, _ := strconv.ParseUint(q.Get("fence"), 10, 64)
	value, _ := strconv.ParseInt(q.Get("value"), 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind := q.Get("kind"); kind {
	case "acquired":
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
	case "read", "write":
		op := regOp{Seq: r.seq, Kind: kind, Worker: worker, Fence: fence}
		r.seq++
		if fence >= r.fence {
			op.Accepted = true
			r.fence = fence
			if kind == "write" {
				r.value = value
			}
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
	r := &register{log: json.NewEncoder(f), holder: -1}
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
