package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// fill puts 1 MB values under "fill/" through cli until etcd refuses a
// put for lack of space, and returns that refusal.
func fill(t *testing.T, cli *clientv3.Client) error {
	t.Helper()
	value := strings.Repeat("x", 1<<20)
	for i := range 64 {
		_, err := cli.Put(t.Context(), fmt.Sprintf("fill/%d", i), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return err
		}
		if err != nil {
			t.Fatalf("Put(fill/%d) = %v, want nil or etcd's NOSPACE", i, err)
		}
	}
	t.Fatalf("etcd took 64 MB over a 16 MB quota")
	return nil
}

// The adversary is a store out of space: etcd at its backend quota with
// the NOSPACE alarm raised refuses every put and lease grant. Acquire must
// fail at once with an error that says so (wrapping dlock.ErrNoSpace and
// etcd's own error), on a Locker with a session and on a new one, while a
// lock held from before keeps being refreshed and is released: etcd still
// serves reads, deletes and keep-alives.
func TestNoSpace(t *testing.T) {
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{Args: []string{"--quota-backend-bytes=16777216"}})
	cli := e.Client(t)
	held := newLocker(t, cli, nil)
	k, err := held.Acquire(t.Context(), "held", dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire(held) = %v", err)
	}
	refusal := fill(t, cli)
	t.Logf("etcd's refusal of a put: %v", refusal)
	alarms, err := cli.AlarmList(t.Context())
	if err != nil || len(alarms.Alarms) != 1 || alarms.Alarms[0].Alarm != etcdserverpb.AlarmType_NOSPACE {
		t.Fatalf("AlarmList() = %v, %v; want the NOSPACE alarm", alarms, err)
	}

	fresh := newLocker(t, cli, nil)
	for _, c := range []struct {
		what string
		l    *dlock.Locker
	}{{"a Locker with a session", held}, {"a new Locker", fresh}} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		start := time.Now()
		_, err := c.l.Acquire(ctx, "wanted")
		cancel()
		t.Logf("%s: Acquire(wanted) = %v (after %v)", c.what, err, time.Since(start).Round(time.Millisecond))
		if !errors.Is(err, dlock.ErrNoSpace) || !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Errorf("%s: Acquire(wanted) = %v, want an error wrapping dlock.ErrNoSpace and rpctypes.ErrNoSpace", c.what, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
			t.Errorf("%s: Acquire(wanted) waited for its timeout (%v), want a failure at once", c.what, err)
		}
	}
	if n := keysUnder(t, cli, etcdlock.Key("", "wanted")); n != 0 {
		t.Errorf("keys of wanted after the refused Acquires = %d, want 0", n)
	}

	resp, err := cli.Get(t.Context(), etcdlock.Key("", "held"), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(held's keys) = %v, %v; want one key", resp, err)
	}
	if _, err := cli.KeepAliveOnce(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Errorf("KeepAliveOnce(held's session) under NOSPACE = %v, want nil", err)
	}
	if err := k.Refresh(t.Context()); err != nil {
		t.Errorf("Refresh(held) under NOSPACE = %v, want nil (a read)", err)
	}
	if err := k.Release(t.Context()); err != nil {
		t.Errorf("Release(held) under NOSPACE = %v, want nil (a delete)", err)
	}
	if n := keysUnder(t, cli, etcdlock.Key("", "held")); n != 0 {
		t.Errorf("keys of held after Release = %d, want 0", n)
	}
}

// keysUnder returns how many keys are under prefix.
func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) int {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get(%q, prefix, count) = %v", prefix, err)
	}
	return int(resp.Count)
}
