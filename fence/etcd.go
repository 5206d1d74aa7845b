package fence

import (
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
)

// Etcd keeps fenced values in etcd: each resource is one key whose value
// is the token as 20 decimal digits (zero-padded) followed by the value's
// bytes. It is safe for concurrent use.
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
type Etcd struct {
	kv clientv3.KV
}

// NewEtcd returns an Etcd on kv: a *clientv3.Client, or a KV of it such
// as a namespace.NewKV.
func NewEtcd(kv clientv3.KV) *Etcd {
	return &Etcd{kv: kv}
}

// tokenDigits is the width of a token in front of an etcd value: enough
// for any uint64.
const tokenDigits = 20

// encodeToken returns token as tokenDigits zero-padded decimal digits.
func encodeToken(token uint64) string {
	return fmt.Sprintf("%0*d", tokenDigits, token)
}

// Write stores value for key if token is not below the token stored with
// it, in one transaction. A stale token is refused with an error wrapping
// ErrStale and changes nothing.
func (e *Etcd) Write(ctx context.Context, key string, token uint64, value []byte) error {
	if err := checkWrite(key, token); err != nil {
		return err
	}
	if e.kv == nil {
		return fmt.Errorf("fence: Etcd without a client: %w", dlock.ErrInvalid)
	}
	put := clientv3.OpPut(key, encodeToken(token)+string(value))
	// token <= math.MaxInt64, so token+1 does not overflow.
	resp, err := e.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(put).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "<", encodeToken(token+1))},
			[]clientv3.Op{put},
			[]clientv3.Op{clientv3.OpGet(key)},
		)).Commit()
	if err != nil {
		return fmt.Errorf("fence: write %q: %w", key, err)
	}
	if resp.Succeeded {
		return nil
	}
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
		return fmt.Errorf("fence: write %q: unexpected transaction response %v", key, resp)
	}
	_, stored, err := decodeValue(key, kvs[0].Value)
	if err != nil {
		return fmt.Errorf("fence: write %q: %w", key, err)
	}
	return stale(key, token, stored)
}

// Read returns the value and token stored for key. A key never written
// reads as a nil value and token 0.
func (e *Etcd) Read(ctx context.Context, key string) (value []byte, token uint64, err error) {
	if e.kv == nil {
		return nil, 0, fmt.Errorf("fence: Etcd without a client: %w", dlock.ErrInvalid)
	}
	resp, err := e.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("fence: read %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	value, token, err = decodeValue(key, resp.Kvs[0].Value)
	if err != nil {
		return nil, 0, fmt.Errorf("fence: read %q: %w", key, err)
	}
	return value, token, nil
}

// decodeValue splits a stored etcd value into its value and token.
func decodeValue(key string, b []byte) ([]byte, uint64, error) {
	if len(b) < tokenDigits {
		return nil, 0, fmt.Errorf("%q does not hold a fenced value", key)
	}
	for _, c := range b[:tokenDigits] {
		if c < '0' || c > '9' {
			return nil, 0, fmt.Errorf("%q does not hold a fenced value", key)
		}
	}
	token, err := strconv.ParseUint(string(b[:tokenDigits]), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%q does not hold a fenced value: %w", key, err)
	}
	return b[tokenDigits:], token, nil
}
