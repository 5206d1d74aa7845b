package redislock_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
	"github.com/redis/go-redis/v9"
)

// packed is the stamp part of a held lock's value as this version writes
// it (see lua/value.lua), encoded here independently of the package:
// owner, '|', a byte 64 + 8×len(ttl) + len(n), the fence in 7 bytes,
// then the lease in ms and the renewal counter, big-endian, each in as
// few bytes as it needs (the lease at least one, the counter none at 0).
func packed(owner string, fence, ttlMs, n uint64) string {
	minimal := func(x uint64) []byte {
		b := binary.BigEndian.AppendUint64(nil, x)
		for len(b) > 0 && b[0] == 0 {
			b = b[1:]
		}
		return b
	}
	t, c := minimal(ttlMs), minimal(n)
	if len(t) == 0 {
		t = []byte{0}
	}
	f := binary.BigEndian.AppendUint64(nil, fence)[1:]
	return owner + "|" + string(rune(64+8*len(t)+len(c))) + string(f) + string(t) + string(c)
}

// decimal is the stamp part of a held lock's value as Lockers before the
// packed form wrote it: owner|fence.ttl.n.
func decimal(owner string, fence, ttlMs, n uint64) string {
	return owner + "|" + strconv.FormatUint(fence, 10) + "." + strconv.FormatUint(ttlMs, 10) + "." + strconv.FormatUint(n, 10)
}

func TestPackedHelper(t *testing.T) {
	got := packed("id:1", 0x01020304050607, 30000, 0)
	want := "id:1|P\x01\x02\x03\x04\x05\x06\x07\x75\x30"
	if got != want {
		t.Errorf("packed = %q, want %q", got, want)
	}
}

// prevScripts are the acquire, release and refresh scripts of the
// version before the packed value (testdata/prev, copied from redislock
// at b8f78fb): what an old Locker runs during a rolling upgrade.
type prevScripts struct{ acquire, release, refresh *luascript.Script }

func loadPrev(t *testing.T) prevScripts {
	t.Helper()
	p := func(f string) string { return "tests/testdata/prev/" + f + ".lua" }
	return prevScripts{
		acquire: assemble(t, p("acquire_fast"), p("queue_fast"), p("common"), p("acquire")),
		release: assemble(t, p("owner_held"), p("release_fast"), p("release_handoff"), p("common"), p("release")),
		refresh: assemble(t, p("refresh")),
	}
}

// upgradeSetup starts a server and returns a client, the previous
// version's scripts, a Locker of this version, a name and its keys.
func upgradeSetup(t *testing.T, label string) (*redis.Client, prevScripts, *dlock.Locker, string, []string) {
	t.Helper()
	client := testserver.StartRedis(t).Client(t)
	name := testkit.UniqueName(t, label)
	return client, loadPrev(t), newLocker(t, client), name, nameKeys(name)
}

// fenceOf returns the fence of a reply {1, fence}, failing t otherwise.
func fenceOf(t *testing.T, what string, reply any) uint64 {
	t.Helper()
	r, ok := reply.([]any)
	if !ok || len(r) != 2 || r[0] != int64(1) {
		t.Fatalf("%s = %v, want [1 fence]", what, reply)
	}
	f, err := strconv.ParseUint(fmt.Sprint(r[1]), 10, 64)
	if err != nil {
		t.Fatalf("%s = %v, want [1 fence]", what, reply)
	}
	return f
}

// TestValueUpgradeOldHolder: the adversary is a Locker of the previous
// version (its own scripts, testdata/prev) holding a name, in the decimal
// value, when this version's Locker and scripts meet it. They must see
// the name held, read its fence exactly (the next token is above it),
// take its stamp for a takeover, and queue behind it; the old holder
// renews and releases with its own scripts, handing the name to the new
// waiter in its own format, which the new holder's first renewal packs;
// once it dies, its decimal stamp is what a takeover names.
func TestValueUpgradeOldHolder(t *testing.T) {
	client, prev, l, name, keys := upgradeSetup(t, "upgrade-old-holder")
	const old, waiter = "oldLockerId:1", "newLockerId:7"

	f0 := fenceOf(t, "old acquire", mustRun(t, client, prev.acquire, keys, acquireArgs(old, "", "0", "x", 0, "")...))
	if got := mustRun(t, client, prev.refresh, keys[:1], old, 30000, "0", 10000); got != int64(1) {
		t.Fatalf("old refresh = %v, want 1", got)
	}
	if v, want := client.Get(t.Context(), keys[0]).Val(), decimal(old, f0, 30000, 1); v != want {
		t.Fatalf("old holder's value = %q, want %q", v, want)
	}
	testkit.WantNotAcquired(t, l, name, "while an old Locker holds it")
	if infos, err := l.Inspect(t.Context(), name); err != nil || len(infos) != 1 || infos[0].Owner != old || infos[0].Fence != f0 {
		t.Errorf("Inspect = %+v, %v; want owner %q, fence %d", infos, err, old, f0)
	}
	// The new acquire script reads the old value's stamp and lease, and queues.
	got := mustRun(t, client, testhook.Scripts["acquire"], keys, acquireArgs(waiter, "", "1", "x", 1, "")...)
	if r, ok := got.([]any); !ok || len(r) != 5 || r[3] != decimal(old, f0, 30000, 1) || r[4] != int64(30000) {
		t.Fatalf("new waiter's acquire = %v, want [0 wait 1 %s 30000]", got, decimal(old, f0, 30000, 1))
	}
	// The old release hands the name to the new waiter, in the old format.
	if got := fmt.Sprint(mustRun(t, client, prev.release, keys, releaseArgs(old)...)); !strings.HasPrefix(got, "[1 "+waiter+" ") {
		t.Fatalf("old release = %v, want [1 %s fence ticket]", got, waiter)
	}
	_, f1, _, _ := testhook.ParseValue(client.Get(t.Context(), keys[0]).Val())
	if f1 <= f0 {
		t.Errorf("token handed on by the old release = %d, want above %d", f1, f0)
	}
	if got := mustRun(t, client, testhook.Scripts["refresh"], keys[:1], waiter, 30000, strconv.FormatUint(f1, 10), 10000); got != int64(1) {
		t.Fatalf("new refresh of a value the old release wrote = %v, want 1", got)
	}
	if v := client.Get(t.Context(), keys[0]).Val(); !strings.HasPrefix(v, packed(waiter, f1, 30000, 1)+",") {
		t.Errorf("value after the new holder's renewal = %q, want %q,qexp", v, packed(waiter, f1, 30000, 1))
	}
	if got := mustRun(t, client, testhook.Scripts["release"], keys, releaseArgs(waiter)...); fmt.Sprint(got) != "[1]" {
		t.Fatalf("new release = %v, want [1]", got)
	}
	k := testkit.MustTryAcquire(t, l, name)
	if k.Fence() <= f1 {
		t.Errorf("next token %d, want above %d", k.Fence(), f1)
	}
	testkit.MustRelease(t, k)

	// An old holder that died is taken over by its decimal stamp.
	f2 := fenceOf(t, "old acquire", mustRun(t, client, prev.acquire, keys, acquireArgs(old, "", "0", "x", 0, "")...))
	f3 := fenceOf(t, "takeover", mustRun(t, client, testhook.Scripts["acquire"], keys, acquireArgs(waiter, "", "0", "x", 0, decimal(old, f2, 30000, 0))...))
	if f3 <= f2 {
		t.Errorf("token after the takeover %d, want above %d", f3, f2)
	}
}

// TestValueUpgradeNewHolder: the adversary is a Locker of the previous
// version (testdata/prev) meeting a name this version holds, in the
// packed value. Its scripts read the value as foreign: every attempt to
// take it (single, queued, or a takeover of the packed stamp) fails with
// an error and leaves the key and queue as they were, its refresh and
// release find nothing of its own, and once the new holder releases, the
// tombstone (decimal, as before) gives it a token above the new one.
func TestValueUpgradeNewHolder(t *testing.T) {
	client, prev, l, name, keys := upgradeSetup(t, "upgrade-new-holder")
	const old = "oldLockerId:1"

	k := testkit.MustTryAcquire(t, l, name, dlock.WithMetadata("a|1.2"))
	v := client.Get(t.Context(), keys[0]).Val()
	stamp := packed(k.Owner(), k.Fence(), 30000, 0)
	if v != stamp+"|a|1.2" {
		t.Fatalf("new holder's value = %q, want %q", v, stamp+"|a|1.2")
	}
	for _, args := range [][]any{
		acquireArgs(old, "", "0", "x", 0, ""),
		acquireArgs(old, "", "1", "x", 1, ""),
		acquireArgs(old, "", "0", "x", 0, stamp),
		acquireArgs(old, "", "1", "s", 1, ""),
	} {
		err := prev.acquire.Run(t.Context(), client, keys, args...).Err()
		if err == nil || !strings.Contains(err.Error(), "did not write") {
			t.Errorf("old acquire %v on a packed value = %v, want the error for a foreign value", args, err)
		}
	}
	if got := mustRun(t, client, prev.refresh, keys[:1], old, 30000, "0", 10000); got != int64(0) {
		t.Errorf("old refresh = %v, want 0", got)
	}
	if got := mustRun(t, client, prev.release, keys, releaseArgs(old)...); got != int64(0) {
		t.Errorf("old release = %v, want 0", got)
	}
	if after := client.Get(t.Context(), keys[0]).Val(); after != v {
		t.Errorf("value after the old Locker's attempts = %q, want %q unchanged", after, v)
	}
	if n := client.Exists(t.Context(), keys[1]).Val(); n != 0 {
		t.Errorf("queue exists after the old Locker's attempts, want none")
	}
	if err := k.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	testkit.MustRelease(t, k)
	if got := client.Get(t.Context(), keys[0]).Val(); got != "|"+strconv.FormatUint(k.Fence(), 10) {
		t.Fatalf("tombstone = %q, want |%d", got, k.Fence())
	}
	f := fenceOf(t, "old acquire after the new release", mustRun(t, client, prev.acquire, keys, acquireArgs(old, "", "0", "x", 0, "")...))
	if f <= k.Fence() {
		t.Errorf("old Locker's token %d, want above the new holder's %d", f, k.Fence())
	}
}

// TestValueUpgradeOldWaiter: the adversary is a waiter of the previous
// version (testdata/prev) queued behind a holder of this version, which
// hands it the name in the packed value its own scripts cannot read. It
// must not be able to renew (or confirm) that hold, so its Locker sees
// the lock lost rather than held in a value it misreads; meanwhile the
// name stays held (by it) for everyone else until the lease ends.
func TestValueUpgradeOldWaiter(t *testing.T) {
	client, prev, l, name, keys := upgradeSetup(t, "upgrade-old-waiter")
	const holder, waiter, oldWaiter = "oldLockerId:1", "newLockerId:7", "oldLockerId:2"

	fenceOf(t, "old acquire", mustRun(t, client, prev.acquire, keys, acquireArgs(holder, "", "0", "x", 0, "")...))
	mustRun(t, client, testhook.Scripts["acquire"], keys, acquireArgs(waiter, "", "1", "x", 1, "")...)
	mustRun(t, client, prev.acquire, keys, acquireArgs(oldWaiter, "", "1", "x", 1, "")...)
	mustRun(t, client, prev.release, keys, releaseArgs(holder)...)
	_, f1, _, _ := testhook.ParseValue(client.Get(t.Context(), keys[0]).Val())
	if got := mustRun(t, client, testhook.Scripts["refresh"], keys[:1], waiter, 30000, strconv.FormatUint(f1, 10), 10000); got != int64(1) {
		t.Fatalf("new refresh = %v, want 1", got)
	}
	if got := fmt.Sprint(mustRun(t, client, testhook.Scripts["release"], keys, releaseArgs(waiter)...)); !strings.HasPrefix(got, "[1 "+oldWaiter+" ") {
		t.Fatalf("new release = %v, want [1 %s fence ticket]", got, oldWaiter)
	}
	owner, f2, _, ok := testhook.ParseValue(client.Get(t.Context(), keys[0]).Val())
	if !ok || owner != oldWaiter || f2 <= f1 {
		t.Fatalf("value after the handoff names %q with token %d (ok %v), want %q above %d", owner, f2, ok, oldWaiter, f1)
	}
	if err := prev.acquire.Run(t.Context(), client, keys, acquireArgs(oldWaiter, "", "2", "x", 2, "")...).Err(); err == nil {
		t.Errorf("old waiter's confirming acquire on a packed value = nil error, want the error for a foreign value")
	}
	if got := mustRun(t, client, prev.refresh, keys[:1], oldWaiter, 30000, strconv.FormatUint(f2, 10), 10000); got != int64(0) {
		t.Errorf("old waiter's refresh of the packed value = %v, want 0 (lost)", got)
	}
	testkit.WantNotAcquired(t, l, name, "while the old waiter's granted lease lasts")
}
