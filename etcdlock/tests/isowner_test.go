package etcdlock_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// guardedPut puts key=value in a transaction guarded by IsOwner(k) and
// reports whether it applied.
func guardedPut(t *testing.T, cli *clientv3.Client, k *dlock.Lock, key, value string) bool {
	t.Helper()
	resp, err := cli.Txn(t.Context()).If(etcdlock.IsOwner(k)).Then(clientv3.OpPut(key, value)).Commit()
	if err != nil {
		t.Fatalf("Txn guarded by IsOwner = %v", err)
	}
	return resp.Succeeded
}

// A stale holder's business write (the adversary: a holder whose lock an
// administrator deleted and another process then took, or one whose hold
// was resumed elsewhere) does not apply when guarded by IsOwner; the
// current holder's does.
func TestIsOwner(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	a, b := newLocker(t, cli, nil), newLocker(t, cli, nil)
	name, job := "isowner/"+t.Name(), "jobs/"+t.Name()

	k := testkit.MustTryAcquire(t, a, name)
	if !guardedPut(t, cli, k, job, "a") {
		t.Fatalf("a Txn guarded by IsOwner of the holder did not apply")
	}
	if _, err := cli.Delete(t.Context(), etcdlock.Key("", name), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	k2 := testkit.MustTryAcquire(t, b, name)
	if guardedPut(t, cli, k, job, "stale") {
		t.Errorf("a Txn guarded by IsOwner of a holder whose key was deleted and taken applied")
	}
	if !guardedPut(t, cli, k2, job, "b") {
		t.Errorf("a Txn guarded by IsOwner of the new holder did not apply")
	}

	r, err := a.Resume(t.Context(), k2.Token())
	if err != nil {
		t.Fatalf("Resume = %v", err)
	}
	if guardedPut(t, cli, k2, job, "stale") {
		t.Errorf("a Txn guarded by IsOwner of a holder whose hold was resumed applied")
	}
	if !guardedPut(t, cli, r, job, "resumed") {
		t.Errorf("a Txn guarded by IsOwner of the resumed lock did not apply")
	}
	if err := r.Extend(t.Context(), 2*driver.DefaultTTL); err != nil {
		t.Fatalf("Extend = %v", err)
	}
	if !guardedPut(t, cli, r, job, "extended") {
		t.Errorf("a Txn guarded by IsOwner after Extend did not apply")
	}
	testkit.MustRelease(t, r)
	if guardedPut(t, cli, r, job, "stale") || guardedPut(t, cli, nil, job, "stale") {
		t.Errorf("a Txn guarded by IsOwner of a released lock, or of nil, applied")
	}
	resp, err := cli.Get(context.Background(), job)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "extended" {
		t.Errorf("Get(%q) = %v, %v; want the last guarded write, \"extended\"", job, resp, err)
	}
}
