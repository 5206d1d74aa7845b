package testserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

func TestEtcd(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	e := testserver.StartEtcd(t)
	t.Logf("etcd ready in %v", time.Since(start))
	c := e.Client(t)
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put(k) = %v", err)
	}

	e.Pause(t)
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Get(qctx, "k")
	cancel()
	if err == nil {
		t.Fatal("Get on a paused server succeeded")
	}
	e.Resume(t)

	addr := e.Addr()
	e.Restart(t)
	if e.Addr() != addr {
		t.Fatalf("Addr() after Restart = %s, want %s", e.Addr(), addr)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.Get(rctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) after Restart = %v, %v; want v", resp, err)
	}
	e.Kill(t)
	kctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Get(kctx, "k"); err == nil {
		t.Fatal("Get on a killed server succeeded")
	}
}

func TestEtcdTLSAuth(t *testing.T) {
	p := testserver.NewPKI(t)
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{PKI: p, ClientCertAuth: true, RootPassword: "secret"})
	ctx := t.Context()
	if _, err := e.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put(k) as root over TLS = %v", err)
	}
	if e.Watchers(t) != 0 {
		t.Errorf("Watchers() = %d, want 0", e.Watchers(t))
	}
	// Authentication is on: the client certificate's common name (dlock)
	// is no user yet, and a request without a password runs as it.
	_, err := e.ClientAs(t, "", "").Get(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Get(k) as the certificate's common name = %v, want permission denied", err)
	}
}
