package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// The layout of shared holds and semaphores in the store (see lua/common.lua),
// checked on the server.

// holderFields returns the holders recorded in name's hash: owner ->
// "expiry|fence|metadata", without the "f" and "m" fields.
func holderFields(t *testing.T, client *redis.Client, name string) map[string]string {
	t.Helper()
	m, err := client.HGetAll(t.Context(), redislock.Key("", name)).Result()
	if err != nil {
		t.Fatalf("HGETALL %s = %v", redislock.Key("", name), err)
	}
	delete(m, "f")
	delete(m, "m")
	return m
}

// queueState returns the owners in name's queue and the modes of their
// entries (owner|ticket|ttl|written|keep|qexp|mode|metadata).
func queueState(t *testing.T, client *redis.Client, name string) (q []string, modes map[string]string) {
	t.Helper()
	k := redislock.Key("", name)
	modes = make(map[string]string)
	for _, e := range client.LRange(t.Context(), k+":q", 0, -1).Val() {
		parts := strings.SplitN(e, "|", 8)
		q = append(q, parts[0])
		if len(parts) == 8 {
			modes[parts[0]] = parts[6]
		}
	}
	return q, modes
}

// wantNoQueue fails unless name has no queue keys at all.
func wantNoQueue(t *testing.T, client *redis.Client, name string) {
	t.Helper()
	k := redislock.Key("", name)
	if n := client.Exists(t.Context(), k+":q").Val(); n != 0 {
		q, modes := queueState(t, client, name)
		t.Fatalf("EXISTS %s:q = %d (queue %v, modes %v), want 0: nothing left of the wait", k, n, q, modes)
	}
}

func TestModeMismatchTakesNothing(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b := newLocker(t, client), newLocker(t, client)
	const name = "sem-mismatch"
	p := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
	// Refused at once; a wait would end with this deadline.
	refused, cancelRefused := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelRefused()
	for _, tc := range []struct {
		what string
		opts []dlock.Option
	}{
		{"exclusive", nil},
		{"shared", []dlock.Option{dlock.Shared()}},
		{"another limit", []dlock.Option{dlock.WithLimit(3)}},
	} {
		// A waiting Acquire: refused at once, without queueing.
		k, err := b.Acquire(refused, name, tc.opts...)
		if !errors.Is(err, dlock.ErrInvalid) {
			if k != nil {
				k.Release(t.Context())
			}
			t.Fatalf("Acquire(%q) %s on a semaphore of 2 = %v, want an error wrapping ErrInvalid", name, tc.what, err)
		}
		wantNoQueue(t, client, name)
		if f := holderFields(t, client, name); len(f) != 1 || f[p.Owner()] == "" {
			t.Fatalf("holders of %q after a refused %s Acquire = %v, want only the permit of %s", name, tc.what, f, p.Owner())
		}
	}
	// Against the waiter a free name was just handed to: the first permit
	// goes to the queue's head, and a lock is then refused.
	q := testkit.MustTryAcquire(t, a, name, dlock.WithLimit(2))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	waiter := testkit.AcquireAsync(ctx, b, name, dlock.WithLimit(2))
	testkit.Eventually(t, "permit waiter queued", func() bool { return queueLen(t, client, name) == 1 })
	if _, err := client.Del(t.Context(), redislock.Key("", name)).Result(); err != nil {
		t.Fatal(err)
	}
	c := newLocker(t, client)
	if k, err := c.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrInvalid) {
		if k != nil {
			k.Release(t.Context())
		}
		t.Fatalf("TryAcquire(%q) exclusive while a permit waiter heads the queue of a free name = %v, want ErrInvalid", name, err)
	}
	got := testkit.WantAcquired(t, waiter, name, time.Minute).Lock
	testkit.MustRelease(t, got)
	_ = p.Release(t.Context()) // deleted behind its back: ErrNotHeld
	_ = q.Release(t.Context())
}

// TestWriterPreference: a writer waiting behind a reader is not overtaken
// by readers that come later (in another Locker each), who queue behind
// it; when the first reader leaves the writer gets the name, and when it
// leaves every reader queued behind it gets the name at once, together.
func TestWriterPreference(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	r1, w, r2, r3, probe := newLocker(t, client), newLocker(t, client), newLocker(t, client), newLocker(t, client), newLocker(t, client)
	const name = "rw"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	k1 := testkit.MustTryAcquire(t, r1, name, dlock.Shared())
	gotW := testkit.AcquireAsync(ctx, w, name)
	testkit.Eventually(t, "writer queued", func() bool { return queueLen(t, client, name) == 1 })
	if k, err := probe.TryAcquire(t.Context(), name, dlock.Shared()); !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			k.Release(t.Context())
		}
		t.Fatalf("TryAcquire(%q, Shared) while a writer waits behind a reader = %v, want ErrNotAcquired", name, err)
	}
	got2 := testkit.AcquireAsync(ctx, r2, name, dlock.Shared())
	testkit.Eventually(t, "second reader queued", func() bool { return queueLen(t, client, name) == 2 })
	got3 := testkit.AcquireAsync(ctx, r3, name, dlock.Shared())
	testkit.Eventually(t, "third reader queued", func() bool { return queueLen(t, client, name) == 3 })
	q, modes := queueState(t, client, name)
	if len(q) != 3 || modes[q[0]] != "x" || modes[q[1]] != "s" || modes[q[2]] != "s" {
		t.Fatalf("queue of %q = %v with modes %v, want the writer (x) then two readers (s)", name, q, modes)
	}
	if f := holderFields(t, client, name); len(f) != 1 {
		t.Fatalf("holders of %q = %v, want only the first reader", name, f)
	}
	testkit.MustRelease(t, k1)
	kw := testkit.WantAcquired(t, gotW, name, time.Minute).Lock
	if kw.Fence() <= k1.Fence() {
		t.Errorf("writer's fence %d, want above the reader's %d", kw.Fence(), k1.Fence())
	}
	testkit.WantWaiting(t, got2, name)
	testkit.WantWaiting(t, got3, name)
	testkit.MustRelease(t, kw)
	// One release handed the name to both readers: both are holders on
	// the server before either confirms (the grants' leases are short).
	if f := holderFields(t, client, name); len(f) != 2 {
		t.Errorf("holders of %q right after the writer's release = %v, want both queued readers", name, f)
	}
	k2 := testkit.WantAcquired(t, got2, name, time.Minute).Lock
	k3 := testkit.WantAcquired(t, got3, name, time.Minute).Lock
	if k2.Fence() <= kw.Fence() || k3.Fence() <= k2.Fence() {
		t.Errorf("readers' fences %d, %d after the writer's %d, want increasing in queue order", k2.Fence(), k3.Fence(), kw.Fence())
	}
	wantNoQueue(t, client, name)
	testkit.MustRelease(t, k2)
	testkit.MustRelease(t, k3)
}

// TestCancelledMultiWaitLeavesNothing cancels a shared wait behind a writer
// and a permit wait on a full semaphore, and checks on the server that
// neither left a queue entry, and that the holders are as they were.
func TestCancelledMultiWaitLeavesNothing(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	holder, waiter := newLocker(t, client), newLocker(t, client)
	for _, tc := range []struct {
		name       string
		hold, wait []dlock.Option
	}{
		{"reader-behind-writer", nil, []dlock.Option{dlock.Shared()}},
		{"full-semaphore", []dlock.Option{dlock.WithLimit(1)}, []dlock.Option{dlock.WithLimit(1)}},
	} {
		k := testkit.MustTryAcquire(t, holder, tc.name, tc.hold...)
		ctx, cancel := context.WithCancel(t.Context())
		got := testkit.AcquireAsync(ctx, waiter, tc.name, append(tc.wait, dlock.WithTTL(time.Hour))...)
		testkit.Eventually(t, tc.name+": waiter queued", func() bool { return queueLen(t, client, tc.name) == 1 })
		cancel()
		if res := <-got; !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("%s: cancelled Acquire = %v, want context.Canceled", tc.name, res.Err)
		}
		wantNoQueue(t, client, tc.name)
		owners := []string{k.Owner()}
		if len(tc.hold) == 0 {
			if v := client.Get(t.Context(), redislock.Key("", tc.name)).Val(); !strings.HasPrefix(v, k.Owner()+"|") {
				t.Fatalf("%s: GET %s = %q, want the writer's hold", tc.name, redislock.Key("", tc.name), v)
			}
		} else if f := holderFields(t, client, tc.name); len(f) != 1 || f[owners[0]] == "" {
			t.Fatalf("%s: holders = %v, want only %s", tc.name, f, owners[0])
		}
		testkit.MustRelease(t, k)
	}
}

// TestSharedFencesInStore: every shared hold gets the next token, the
// hash keeps the last one, the last reader's release leaves it as the
// tombstone, and the next writer counts on from it.
func TestSharedFencesInStore(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b, w := newLocker(t, client), newLocker(t, client), newLocker(t, client)
	const name = "shared-fences"
	key := redislock.Key("", name)
	kw := testkit.MustTryAcquire(t, w, name)
	testkit.MustRelease(t, kw)
	ka := testkit.MustTryAcquire(t, a, name, dlock.Shared())
	kb := testkit.MustTryAcquire(t, b, name, dlock.Shared())
	if ka.Fence() <= kw.Fence() || kb.Fence() <= ka.Fence() {
		t.Errorf("readers' fences %d, %d after a writer's %d, want each above the one before", ka.Fence(), kb.Fence(), kw.Fence())
	}
	if f := client.HGet(t.Context(), key, "f").Val(); f != strconv.FormatUint(kb.Fence(), 10) {
		t.Errorf("HGET %s f = %q, want the last reader's fence %d", key, f, kb.Fence())
	}
	if pttl := client.PTTL(t.Context(), key).Val(); pttl <= 0 {
		t.Errorf("PTTL %s = %v, want the readers' lease (a hash that outlives its holders would stay forever)", key, pttl)
	}
	testkit.MustRelease(t, kb)
	if typ := client.Type(t.Context(), key).Val(); typ != "hash" {
		t.Errorf("TYPE %s with one reader left = %q, want hash", key, typ)
	}
	testkit.MustRelease(t, ka)
	if v := client.Get(t.Context(), key).Val(); v != "|"+strconv.FormatUint(kb.Fence(), 10) {
		t.Errorf("GET %s after the last reader left = %q, want the tombstone |%d", key, v, kb.Fence())
	}
	k := testkit.MustTryAcquire(t, w, name)
	if k.Fence() <= kb.Fence() {
		t.Errorf("writer's fence after the readers = %d, want above %d", k.Fence(), kb.Fence())
	}
	testkit.MustRelease(t, k)
}

// TestSemaphoreGrantsInQueueOrder checks on the server that permits are
// handed out in the queue's order: each freed permit goes to the head of
// the queue, in the release's own script, and the tokens follow arrival
// order (Acquire calls in different Lockers may still return in another
// order, as each learns of its grant over its own connection).
func TestSemaphoreGrantsInQueueOrder(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	const name, n, waiters = "sem-order", 2, 4
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holders := []*dlock.Lock{
		testkit.MustTryAcquire(t, newLocker(t, client), name, dlock.WithLimit(n)),
		testkit.MustTryAcquire(t, newLocker(t, client), name, dlock.WithLimit(n)),
	}
	var gots []<-chan testkit.Acquired
	for i := range waiters {
		gots = append(gots, testkit.AcquireAsync(ctx, newLocker(t, client), name, dlock.WithLimit(n)))
		testkit.Eventually(t, "waiter queued", func() bool { return queueLen(t, client, name) == int64(i+1) })
	}
	q, _ := queueState(t, client, name)
	testkit.MustRelease(t, holders[0])
	if f := holderFields(t, client, name); len(f) != n || f[q[0]] == "" {
		t.Fatalf("holders of %q right after a permit was released = %v, want the first waiter %s and the other holder", name, f, q[0])
	}
	testkit.MustRelease(t, holders[1])
	if f := holderFields(t, client, name); len(f) != n || f[q[0]] == "" || f[q[1]] == "" {
		t.Fatalf("holders of %q right after the second permit was released = %v, want the first two waiters %v", name, f, q[:2])
	}
	var ks []*dlock.Lock
	for i, got := range gots[:2] {
		ks = append(ks, testkit.WantAcquired(t, got, name, time.Minute).Lock)
		if ks[i].Owner() != q[i] {
			t.Fatalf("waiter %d is %s, want %s (queue %v)", i, ks[i].Owner(), q[i], q)
		}
	}
	testkit.MustRelease(t, ks[0])
	testkit.MustRelease(t, ks[1])
	for _, got := range gots[2:] {
		ks = append(ks, testkit.WantAcquired(t, got, name, time.Minute).Lock)
	}
	for i := 1; i < waiters; i++ {
		if ks[i].Fence() <= ks[i-1].Fence() {
			t.Errorf("waiter %d's fence %d, want above waiter %d's %d: permits go in arrival order", i, ks[i].Fence(), i-1, ks[i-1].Fence())
		}
	}
	testkit.MustRelease(t, ks[2])
	testkit.MustRelease(t, ks[3])
	wantNoQueue(t, client, name)
}
