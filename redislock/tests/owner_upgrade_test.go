package redislock_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// TestOwnerUpgrade runs a name through a rolling upgrade of the owner
// strings: Lockers of earlier versions had 22-character ids (128 bits),
// this version's have 11 (64 bits), and both meet on one name until every
// process runs the new code. The adversary is an old Locker whose id
// begins with the new Locker's: if a script compared owners by a prefix
// of either length, one would take (or release) the name the other holds,
// and a token issued after the switch could fall below the old one. The
// old holder's key and its steps are written by hand, as old code wrote
// them, in the decimal value owner|fence.ttl.n of that time (which this
// version still reads; see value_test.go for the packed value).
func TestOwnerUpgrade(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	l := newLocker(t, client)
	name := testkit.UniqueName(t, "upgrade")
	keys := nameKeys(name)

	probe := testkit.MustTryAcquire(t, l, name+"-probe")
	id, _, _ := strings.Cut(probe.Owner(), ":")
	testkit.MustRelease(t, probe)
	if len(id) != 11 {
		t.Fatalf("Locker id %q has %d characters, want 11", id, len(id))
	}
	old := id + "0123456789_:1" // a 22-character id that begins with the new one

	// Old holder, new waiter.
	oldFence := uint64(time.Now().UnixMicro())
	if err := client.Set(t.Context(), keys[0], old+"|"+strconv.FormatUint(oldFence, 10)+".30000.0", 40*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.WantNotAcquired(t, l, name, "while a 22-character owner holds it")
	if got := mustRun(t, client, testhook.Scripts["release"], keys, releaseArgs(old)...); fmt.Sprint(got) != "[1]" {
		t.Fatalf("release by the old owner = %v, want [1]", got)
	}

	// New holder, old waiter.
	k := testkit.MustTryAcquire(t, l, name)
	if k.Fence() <= oldFence {
		t.Errorf("new owner's token %d, want above the old owner's %d", k.Fence(), oldFence)
	}
	if got := mustRun(t, client, testhook.Scripts["acquire"], keys, acquireArgs(old, "", "0", "x", 0, "")...); !strings.HasPrefix(fmt.Sprint(got), "[0 ") {
		t.Errorf("acquire by the old owner while the new one holds = %v, want [0 ...]", got)
	}
	if got := mustRun(t, client, testhook.Scripts["release"], keys, releaseArgs(old)...); fmt.Sprint(got) != "0" {
		t.Errorf("release by the old owner while the new one holds = %v, want 0", got)
	}
	if err := k.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh after the old owner's attempts = %v, want the lock still held", err)
	}
	testkit.MustRelease(t, k)

	// The old owner takes it again, above the new owner's token.
	got := mustRun(t, client, testhook.Scripts["acquire"], keys, acquireArgs(old, "", "0", "x", 0, "")...)
	reply, _ := got.([]any)
	if len(reply) != 2 || reply[0] != int64(1) {
		t.Fatalf("acquire by the old owner after release = %v, want [1 fence]", got)
	}
	if f, _ := strconv.ParseUint(fmt.Sprint(reply[1]), 10, 64); f <= k.Fence() {
		t.Errorf("old owner's token %d after the new owner's %d, want above", f, k.Fence())
	}
}

// TestOwnerFitsEmbeddedString checks the stored value of a lock held
// with a one-hour lease (make bench's memory scenario) against the
// 44-byte limit under which redis-server keeps a string value in the same
// allocation as its object (OBJ_ENCODING_EMBSTR): 16 B per held lock more
// past it. The adversary is an owner or value format that grows.
func TestOwnerFitsEmbeddedString(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	name := "mem:0000000"
	k := testkit.MustTryAcquire(t, newLocker(t, client), name, dlock.WithTTL(time.Hour))
	key := redislock.Key("", name)
	v := client.Get(t.Context(), key).Val()
	if len(v) > 44 {
		t.Errorf("GET %s = %q (%d bytes), want at most 44", key, v, len(v))
	}
	if enc := client.ObjectEncoding(t.Context(), key).Val(); enc != "embstr" {
		t.Errorf("OBJECT ENCODING %s = %q, want embstr", key, enc)
	}
	testkit.MustRelease(t, k)
}
