package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
)

// A nil client and bad options give errors wrapping ErrInvalid, not a
// panic.
func TestNewInvalid(t *testing.T) {
	if l, err := etcdlock.New(nil, nil); !errors.Is(err, dlock.ErrInvalid) || l != nil {
		t.Errorf("New(nil, nil) = %v, %v; want nil, ErrInvalid", l, err)
	}
	// New makes no request: a client of no server will do.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New = %v", err)
	}
	defer cli.Close()
	for _, o := range []*etcdlock.Options{{SessionTTL: -time.Second}, {CompactEvery: -time.Second}} {
		if l, err := etcdlock.New(cli, o); !errors.Is(err, dlock.ErrInvalid) || l != nil {
			t.Errorf("New(cli, %+v) = %v, %v; want nil, ErrInvalid", o, l, err)
		}
	}
}
