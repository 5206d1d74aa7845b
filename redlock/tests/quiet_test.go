package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/redlock"
)

// deadMaster is an address where nothing listens.
const deadMaster = "127.0.0.1:1"

// quietWorker takes and releases a name on two live masters and a dead
// one (args[1], args[2]), through clients it makes itself ("plain") or
// through dlock.Open ("open"), and prints "done".
func quietWorker(ctx context.Context, args []string) error {
	hosts := []string{args[1], args[2], deadMaster}
	var l *dlock.Locker
	var err error
	if args[0] == "open" {
		l, err = dlock.Open(ctx, "redlock://"+strings.Join(hosts, ","))
	} else {
		cs := make([]redis.UniversalClient, len(hosts))
		for i, h := range hosts {
			cs[i] = redis.NewClient(&redis.Options{Addr: h})
		}
		l, err = redlock.New(cs, nil)
	}
	if err != nil {
		return err
	}
	defer l.Close()
	k, err := l.Acquire(ctx, "quiet")
	if err != nil {
		return err
	}
	if err := k.Release(ctx); err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

// TestOpenDoesNotLog: with a master down, go-redis logs the failed dials
// of the user's own clients to standard error, but nothing about the
// clients dlock.Open made.
func TestOpenDoesNotLog(t *testing.T) {
	live := addrs(startMasters(t, 2))
	plain := testworker.Start(t, "quiet", "plain", live[0], live[1])
	plain.Expect(t, "done", 30*time.Second)
	if err := plain.Wait(t, 10*time.Second); err != nil || !strings.Contains(plain.Stderr(), "redis: ") {
		t.Fatalf("plain go-redis clients: exit %v, stderr %q; want go-redis's log line (else this test cannot fail)", err, plain.Stderr())
	}
	open := testworker.Start(t, "quiet", "open", live[0], live[1])
	open.Expect(t, "done", 30*time.Second)
	if err := open.Wait(t, 10*time.Second); err != nil || open.Stderr() != "" {
		t.Errorf("dlock.Open with a master down: exit %v, stderr %q; want nothing on stderr", err, open.Stderr())
	}
}
