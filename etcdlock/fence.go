package etcdlock

import (
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule"
)

// fencePrefix starts the error messages of Fence.
const fencePrefix = "etcdlock: fence"

// Fence keeps fenced values in etcd (see package fence for the rule): each
// resource is one key whose value is the token as 20 decimal digits
// (zero-padded) followed by the value's bytes. It is safe for concurrent
// use. A Fence needs no Locker: the tokens may come from any dlock
// backend, as long as one lock guards the key.
//
// With fixed-width digits, byte order is token order, so Write is one
// transaction that compares the stored bytes against the next token:
//
//	If(CreateRevision(key) = 0)                    -- never written
//	Then(Put(key, token+value))
//	Else(Txn(
//		If(Value(key) < "%020d" of token+1)     -- stored token <= token
//		Then(Put(key, token+value))
//		Else(Get(key))))                        -- refused: read the token
//
// (etcd fails every Value compare on a missing key, hence the outer
// compare; nested transactions need etcd 3.3 or later.) Other programs
// that read the key must strip the first 20 bytes, or use Read; a key
// written without them is not a fenced value and Read refuses it.
type Fence struct {
	kv clientv3.KV
}

// NewFence returns a Fence on kv: a *clientv3.Client, or a KV of it such
// as a namespace.NewKV. A nil kv gives a Fence whose every call returns an
// error wrapping dlock.ErrInvalid.
func NewFence(kv clientv3.KV) *Fence {
	return &Fence{kv: kv}
}

// fenceDigits is the width of a token in front of a fenced value: enough
// for any uint64.
const fenceDigits = 20

// encodeFence returns token as fenceDigits zero-padded decimal digits.
func encodeFence(token uint64) string {
	return fmt.Sprintf("%0*d", fenceDigits, token)
}

// Write stores value for key if token is not below the token stored with
// it, in one transaction. A stale token is refused with an error wrapping
// fence.ErrStale and changes nothing.
func (f *Fence) Write(ctx context.Context, key string, token uint64, value []byte) error {
	if err := fencerule.CheckWrite(fencePrefix, key, token); err != nil {
		return err
	}
	if f.kv == nil {
		return fmt.Errorf("%s: no client: %w", fencePrefix, dlock.ErrInvalid)
	}
	put := clientv3.OpPut(key, encodeFence(token)+string(value))
	// token <= math.MaxInt64, so token+1 does not overflow.
	resp, err := f.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(put).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "<", encodeFence(token+1))},
			[]clientv3.Op{put},
			[]clientv3.Op{clientv3.OpGet(key)},
		)).Commit()
	if err != nil {
		return fmt.Errorf("%s: write %q: %w", fencePrefix, key, err)
	}
	if resp.Succeeded {
		return nil
	}
	return refusedFence(key, token, resp)
}

// refusedFence returns the error of a Write whose outer compare failed:
// nil if the inner one succeeded, or else the stale error with the stored
// token that the inner Get read.
func refusedFence(key string, token uint64, resp *clientv3.TxnResponse) error {
	var inner *etcdserverpb.TxnResponse
	if len(resp.Responses) == 1 {
		inner = resp.Responses[0].GetResponseTxn()
	}
	if inner.GetSucceeded() {
		return nil
	}
	var kvs []*mvccpb.KeyValue
	if len(inner.GetResponses()) == 1 {
		kvs = inner.GetResponses()[0].GetResponseRange().GetKvs()
	}
	if len(kvs) == 0 {
		// A transaction sees one revision, so the key cannot have gone
		// between the two compares.
		return fmt.Errorf("%s: write %q: unexpected transaction response %v", fencePrefix, key, resp)
	}
	_, stored, err := decodeFenced(key, kvs[0].Value)
	if err != nil {
		return fmt.Errorf("%s: write %q: %w", fencePrefix, key, err)
	}
	return fencerule.Stale(fencePrefix, key, token, stored)
}

// Read returns the value and token stored for key. A key never written
// reads as a nil value and token 0.
func (f *Fence) Read(ctx context.Context, key string) (value []byte, token uint64, err error) {
	if f.kv == nil {
		return nil, 0, fmt.Errorf("%s: no client: %w", fencePrefix, dlock.ErrInvalid)
	}
	resp, err := f.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read %q: %w", fencePrefix, key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	value, token, err = decodeFenced(key, resp.Kvs[0].Value)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read %q: %w", fencePrefix, key, err)
	}
	return value, token, nil
}

// decodeFenced splits a stored fenced value into its value and token.
func decodeFenced(key string, b []byte) ([]byte, uint64, error) {
	if len(b) < fenceDigits {
		return nil, 0, fmt.Errorf("%q does not hold a fenced value", key)
	}
	for _, c := range b[:fenceDigits] {
		if c < '0' || c > '9' {
			return nil, 0, fmt.Errorf("%q does not hold a fenced value", key)
		}
	}
	token, err := strconv.ParseUint(string(b[:fenceDigits]), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%q does not hold a fenced value: %w", key, err)
	}
	return b[fenceDigits:], token, nil
}
