package zklock_test

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/zklock"
	"github.com/dlock-go/dlock/zklock/internal/testhook"
)

// opMulti is ZooKeeper's opcode of a multi request, as countingConn names
// it.
const opMulti = "op14"

// holdMany takes n distinct names through a driver on conn, with a lease
// longer than the test, and returns the driver and the leases.
func holdMany(t *testing.T, conn *zk.Conn, n int) (driver.Driver, []driver.Lease) {
	t.Helper()
	l, d, err := testhook.New(conn)
	if err != nil {
		t.Fatalf("testhook.New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	prefix := fmt.Sprintf("refresh-%d-", time.Now().UnixNano())
	ls := make([]driver.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				ls[i] = driver.Lease{Name: fmt.Sprintf("%s%04d", prefix, i), Owner: fmt.Sprintf("refreshtest:%d", i), TTL: time.Hour}
				res, err := d.Acquire(t.Context(), ls[i])
				if err == nil && !res.Acquired {
					err = errors.New("not acquired")
				}
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Acquire of %d names: %v", n, err)
	}
	return d, ls
}

// refreshCounted runs d.Refresh(ls) and returns its results, the requests
// c counted during it by kind, and the transactions z applied (each multi
// is one, whatever its size).
func refreshCounted(t *testing.T, d driver.Driver, ls []driver.Lease, z interface{ Zxid(testing.TB) int64 }, take func() (int, map[string]int)) ([]error, map[string]int, int64) {
	t.Helper()
	take()
	zxid := z.Zxid(t)
	errs := d.Refresh(t.Context(), ls)
	_, by := take()
	return errs, by, z.Zxid(t) - zxid
}

// Refresh of 2,500 held locks checks them with 3 multi requests (1,000
// checks each at most), pipelined, not 2,500 requests: the server applies
// 3 transactions.
func TestRefreshBatches(t *testing.T) {
	z, conn, counter := countingServer(t)
	d, ls := holdMany(t, conn, 2500)
	errs, by, txns := refreshCounted(t, d, ls, z, counter.Take)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Refresh: lease %d (%q) = %v, want nil", i, ls[i].Name, err)
		}
	}
	if want := map[string]int{opMulti: 3}; !maps.Equal(by, want) {
		t.Errorf("Refresh of %d leases sent requests %v, want %v", len(ls), by, want)
	}
	if txns != 3 {
		t.Errorf("Refresh of %d leases: the server's zxid moved by %d, want 3 (one transaction per multi)", len(ls), txns)
	}
}

// The adversary is another client (an operator's `delete` in zkCli, a
// cleanup job) that deletes one held lock's child behind the Locker's
// back: the batch reports exactly that lock lost, and the 499 others
// renewed. The multi that meets the gone child fails as a whole; the
// checks before it passed, and the 249 after it are sent again in a
// second multi.
func TestRefreshChildGone(t *testing.T) {
	z, conn, counter := countingServer(t)
	d, ls := holdMany(t, conn, 500)
	const gone = 250
	deleteChildren(t, conn, zklock.Key("", ls[gone].Name))
	errs, by, _ := refreshCounted(t, d, ls, z, counter.Take)
	for i, err := range errs {
		switch {
		case i == gone && !errors.Is(err, driver.ErrNotHeld):
			t.Errorf("Refresh: lease %d, whose child was deleted = %v, want ErrNotHeld", i, err)
		case i != gone && err != nil:
			t.Errorf("Refresh: lease %d = %v, want nil", i, err)
		}
	}
	if want := map[string]int{opMulti: 2}; !maps.Equal(by, want) {
		t.Errorf("Refresh of %d leases, one child gone, sent requests %v, want %v", len(ls), by, want)
	}
	// The next renewal knows the lost one without asking, and checks
	// the others in one multi.
	errs, by, _ = refreshCounted(t, d, ls, z, counter.Take)
	for i, err := range errs {
		switch {
		case i == gone && !errors.Is(err, driver.ErrNotHeld):
			t.Errorf("second Refresh: lost lease %d = %v, want ErrNotHeld", i, err)
		case i != gone && err != nil:
			t.Errorf("second Refresh: lease %d = %v, want nil", i, err)
		}
	}
	if want := map[string]int{opMulti: 1}; !maps.Equal(by, want) {
		t.Errorf("second Refresh sent requests %v, want %v", by, want)
	}
}
