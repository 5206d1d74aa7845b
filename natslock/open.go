package natslock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// connectTimeout bounds the connection Open makes, when ctx has no
// earlier deadline.
const connectTimeout = 10 * time.Second

func init() {
	backend.Register("nats", open)
}

// open serves store URLs nats://[user:pass@]host[:port][,host[:port]]/bucket
// with the query parameters prefix (Options.Prefix) and replicas (of a
// bucket it creates). It connects, opens the bucket or creates it
// (history 1), giving up when ctx ends, and makes a Locker that closes
// the connection.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "prefix", "replicas")
	if err != nil {
		return nil, err
	}
	hosts, err := backend.URLHosts(u, nats.DefaultPort)
	if err != nil {
		return nil, err
	}
	bucket := strings.TrimPrefix(u.Path, "/")
	if bucket == "" || strings.ContainsAny(bucket, "/. *>") {
		return nil, fmt.Errorf("%w: nats:// URL needs a bucket name as its path, without / . * > or spaces: %q", dlock.ErrBadURL, bucket)
	}
	replicas := 1
	if s := q.Get("replicas"); s != "" {
		if replicas, err = strconv.Atoi(s); err != nil || replicas < 1 || replicas > 5 {
			return nil, fmt.Errorf("%w: replicas %q is not 1 to 5", dlock.ErrBadURL, s)
		}
	}
	opts := &Options{Prefix: q.Get("prefix")}
	if _, err := NewDriver(nopKV{}, opts); err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	nc, err := connect(ctx, u, hosts)
	if err != nil {
		return nil, sessionlock.ConnectError(ctx, "natslock", hosts, driver.StoreError(errorKinds{}, err))
	}
	kv, err := bucketOf(ctx, nc, bucket, replicas)
	if err != nil {
		nc.Close()
		return nil, sessionlock.ConnectError(ctx, "natslock", hosts, driver.StoreError(errorKinds{}, err))
	}
	d, _ := NewDriver(kv, opts)
	d.(*natsDriver).onClose = nc.Close
	return dlock.NewLocker(d, driver.LockerOptions{}), nil
}

// connect connects to hosts as u's user, within ctx.
func connect(ctx context.Context, u *url.URL, hosts []string) (*nats.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := connectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(deadline)), time.Millisecond)
	}
	servers := make([]string, len(hosts))
	for i, h := range hosts {
		servers[i] = "nats://" + h
	}
	o := []nats.Option{nats.Name("dlock"), nats.Timeout(timeout), nats.MaxReconnects(-1)}
	if u.User != nil {
		o = append(o, nats.UserInfo(u.User.Username(), backend.URLPassword(u)))
	}
	return nats.Connect(strings.Join(servers, ","), o...)
}

// bucketOf opens the KV bucket, creating it if it does not exist.
func bucketOf(ctx context.Context, nc *nats.Conn, bucket string, replicas int) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Replicas: replicas})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, bucket) // created meanwhile
	}
	return kv, err
}

// nopKV is a KeyValue that open passes to NewDriver to check options
// before it connects; it is never called.
type nopKV struct{ jetstream.KeyValue }
