package testserver_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// respConn is a raw connection speaking RESP through the proxy, so that
// the test sees exactly what the proxy does (no pool, no retries).
type respConn struct {
	net.Conn
	r *bufio.Reader
}

func dialResp(t *testing.T, addr string) *respConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c, bufio.NewReader(c)}
}

// send writes a command made of words.
func (c *respConn) send(t *testing.T, words ...string) {
	t.Helper()
	b := []byte("*" + strconv.Itoa(len(words)) + "\r\n")
	for _, w := range words {
		b = append(b, "$"+strconv.Itoa(len(w))+"\r\n"+w+"\r\n"...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write %q: %v", words, err)
	}
}

// reply reads one reply line within d.
func (c *respConn) reply(d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	return c.r.ReadString('\n')
}

// pinged returns a connection to addr that has answered a PING.
func pinged(t *testing.T, addr string) *respConn {
	t.Helper()
	c := dialResp(t, addr)
	c.send(t, "PING")
	wantReply(t, c, "+PONG\r\n")
	return c
}

func wantReply(t *testing.T, c *respConn, want string) {
	t.Helper()
	got, err := c.reply(5 * time.Second)
	if got != want || err != nil {
		t.Fatalf("reply = %q, %v; want %q", got, err, want)
	}
}

func wantNoReply(t *testing.T, c *respConn) {
	t.Helper()
	var ne net.Error
	if got, err := c.reply(300 * time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("reply = %q, %v; want none (a read timeout)", got, err)
	}
}

func TestProxy(t *testing.T) {
	r := testserver.StartRedis(t)
	direct := r.Client(t)
	p := testserver.StartProxy(t, r.Addr())
	counter := func() int {
		n, _ := direct.Get(t.Context(), "n").Int()
		return n
	}

	t.Run("Pass", func(t *testing.T) { pinged(t, p.Addr()) })

	t.Run("Partition", func(t *testing.T) {
		direct.Del(t.Context(), "n")
		c := pinged(t, p.Addr()) // open before the partition
		p.Partition(t)
		c.send(t, "INCR", "n")
		wantNoReply(t, c)
		if n := counter(); n != 0 {
			t.Fatalf("counter = %d during the partition, want 0 (the request must not reach the server)", n)
		}
		late := dialResp(t, p.Addr()) // opened during the partition
		late.send(t, "INCR", "n")
		wantNoReply(t, late)
		p.Heal(t)
		// Held data is delivered on the same connections, which stayed open.
		// (in either order: the two connections are healed concurrently)
		a, errA := c.reply(5 * time.Second)
		b, errB := late.reply(5 * time.Second)
		if errA != nil || errB != nil || a == b || !strings.Contains(":1\r\n:2\r\n", a) || !strings.Contains(":1\r\n:2\r\n", b) {
			t.Fatalf("replies after Heal = %q, %v and %q, %v; want :1 and :2", a, errA, b, errB)
		}
		c.send(t, "PING")
		wantReply(t, c, "+PONG\r\n")
	})

	t.Run("DropReplies", func(t *testing.T) {
		direct.Del(t.Context(), "n")
		c := pinged(t, p.Addr())
		p.DropReplies(t)
		c.send(t, "INCR", "n")
		wantNoReply(t, c)
		if n := counter(); n != 1 {
			t.Fatalf("counter = %d with replies dropped, want 1 (the request must reach the server)", n)
		}
		p.Heal(t)
		if got, err := c.reply(5 * time.Second); err != io.EOF {
			t.Fatalf("read after Heal = %q, %v; want io.EOF (a stream with a gap is closed)", got, err)
		}
		c2 := dialResp(t, p.Addr())
		c2.send(t, "INCR", "n")
		wantReply(t, c2, ":2\r\n")
	})

	t.Run("Latency", func(t *testing.T) {
		c := dialResp(t, p.Addr())
		const d = 200 * time.Millisecond
		p.Latency(t, d)
		start := time.Now()
		c.send(t, "PING")
		wantReply(t, c, "+PONG\r\n")
		if rtt := time.Since(start); rtt < 2*d {
			t.Errorf("round trip with %v latency = %v, want at least %v", d, rtt, 2*d)
		}
		p.Heal(t)
		start = time.Now()
		c.send(t, "PING")
		wantReply(t, c, "+PONG\r\n")
		t.Logf("round trip after Heal: %v", time.Since(start))
	})

	t.Run("ResetConnections", func(t *testing.T) {
		c := dialResp(t, p.Addr())
		c.send(t, "CLIENT", "SETNAME", "victim")
		wantReply(t, c, "+OK\r\n")
		p.ResetConnections(t)
		if got, err := c.reply(5 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after ResetConnections = %q, %v; want ECONNRESET", got, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			list, err := direct.ClientList(t.Context()).Result()
			if err != nil {
				t.Fatalf("CLIENT LIST = %v", err)
			}
			if !strings.Contains(list, "name=victim ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server still has the reset connection after 5s:\n%s", list)
			}
			time.Sleep(20 * time.Millisecond)
		}
		pinged(t, p.Addr()) // new connections work
	})
}
