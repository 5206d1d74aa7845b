package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/driver"
)

// SQLite wake-ups: waiters in other processes on the host (and in other
// Lockers of this one) are woken by the release itself. Next to the
// database file, a directory (the file's path + wakeSuffix) holds one
// empty wake file per name that someone waited for. A waiter creates its
// name's file and watches the directory (inotify on Linux); a release,
// after its commit, opens the name's file for writing and closes it, which
// the watchers see. A wake-up is a hint, never proof: the database stays
// the only source of truth, and a lost wake-up (a file removed, a full
// event queue) costs a waiter latency, up to Options.MaxRetryInterval,
// never safety. The watching itself is in wake_sqlite_linux.go (and
// wake_sqlite_other.go, where it fails and waiters poll).

// wakeSuffix names the wake directory after the database file, as SQLite
// names its -wal and -shm files.
const wakeSuffix = "-wake"

// changeSuffix names a name's change file after its wake file.
const changeSuffix = ".changes"

// sqliteDriver adds cross-process wake-ups to the SQLite driver.
type sqliteDriver struct {
	*sqlDriver
	wakes *wakeFiles
	wal   *walKeeper // keeps the -wal file small (see wal_sqlite.go)
}

func newSQLiteDriver(d *sqlDriver) *sqliteDriver {
	wakes := &wakeFiles{db: d, table: d.table}
	return &sqliteDriver{sqlDriver: d, wakes: wakes, wal: newWALKeeper(d.db, wakes.dbFile)}
}

// Watch implements driver.Notifier. It fails, and the core polls, where
// the database has no file (":memory:", a shared-cache or temporary
// database) or the host cannot watch files (outside Linux).
func (d *sqliteDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop, err := d.wakes.watch(ctx, d.wakes.wakeFile(name))
	if err != nil {
		return nil, nil, fmt.Errorf("sqllock: watch %q: %w", name, err)
	}
	return w, stop, nil
}

// WatchChanges implements driver.ChangeNotifier, for Locker.Observe: the
// name's change file is touched by every acquisition and release. A lease
// that runs out is not reported; Observe looks again when it would have.
func (d *sqliteDriver) WatchChanges(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop, err := d.wakes.watch(ctx, d.wakes.wakeFile(name)+changeSuffix)
	if err != nil {
		return nil, nil, fmt.Errorf("sqllock: watch changes of %q: %w", name, err)
	}
	return w, stop, nil
}

// Acquire takes l and, when it did, tells the name's observers. It then
// has the -wal file looked at, at most every walCheckInterval, in the
// background.
func (d *sqliteDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	res, err := d.sqlDriver.Acquire(ctx, l)
	d.wal.maybeCheck()
	if err == nil && res.Acquired {
		d.wakes.touch(ctx, d.wakes.wakeFile(l.Name)+changeSuffix)
	}
	return res, err
}

// Release frees l's hold and then wakes the name's waiters, also when the
// release only took out a waiting writer's intent (ErrNotHeld).
func (d *sqliteDriver) Release(ctx context.Context, l driver.Lease) error {
	err := d.sqlDriver.Release(ctx, l)
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		d.wakes.released(ctx, l.Name)
	}
	return err
}

// ForceRelease frees name whatever its owner and wakes its waiters.
func (d *sqliteDriver) ForceRelease(ctx context.Context, name string) (bool, error) {
	ok, err := d.sqlDriver.ForceRelease(ctx, name)
	if ok {
		d.wakes.released(ctx, name)
	}
	return ok, err
}

func (d *sqliteDriver) Close() error {
	d.wakes.close()
	err := d.wal.close()
	if err != nil {
		err = fmt.Errorf("sqllock: close the checkpoints' connection: %w", err)
	}
	return errors.Join(err, d.sqlDriver.Close())
}

var (
	_ driver.Driver         = (*sqliteDriver)(nil)
	_ driver.Notifier       = (*sqliteDriver)(nil)
	_ driver.ChangeNotifier = (*sqliteDriver)(nil)
	_ driver.ForceReleaser  = (*sqliteDriver)(nil)
	_ driver.Inspector      = (*sqliteDriver)(nil)
)

// errNoFile says that the database has no file to put wake files next to.
var errNoFile = errors.New("the database has no file: waiters poll")

// dirWatcher watches a wake directory (see watchDir). Its goroutine exits
// when close is called or the directory goes away; dead then reports
// true.
type dirWatcher interface {
	dead() bool
	close()
}

// wakeFiles is a Locker's side of the wake directory.
type wakeFiles struct {
	db    *sqlDriver
	table string

	mu       sync.Mutex
	dir      string // the wake directory, "" until known
	dirErr   error  // errNoFile, or the watcher could not be made on this host: never retried
	closed   bool
	watcher  dirWatcher                 // nil until the first watch, or after it died
	watchers map[string][]chan struct{} // by wake file name, oldest first
}

// wakeFile returns the name of the wake file of the lease table's name:
// a hash, so any name makes a valid file name.
func (w *wakeFiles) wakeFile(name string) string {
	h := sha256.Sum256([]byte(w.table + "\x00" + name))
	return hex.EncodeToString(h[:16])
}

// directory returns the wake directory, asking the database where its
// file is on first use.
func (w *wakeFiles) directory(ctx context.Context) (string, error) {
	w.mu.Lock()
	dir, err := w.dir, w.dirErr
	w.mu.Unlock()
	if dir != "" || err != nil {
		return dir, err
	}
	var file string
	err = w.db.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if file == "" {
		w.dirErr = errNoFile
		return "", w.dirErr
	}
	w.dir = file + wakeSuffix
	return w.dir, nil
}

// dbFile returns the database's file (errNoFile if it has none), asking
// the database on first use.
func (w *wakeFiles) dbFile(ctx context.Context) (string, error) {
	dir, err := w.directory(ctx)
	return strings.TrimSuffix(dir, wakeSuffix), err
}

// watch watches file in the wake directory, and creates it.
func (w *wakeFiles) watch(ctx context.Context, file string) (<-chan struct{}, func(), error) {
	dir, err := w.directory(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, nil, errors.New("closed")
	}
	if w.watcher == nil || w.watcher.dead() {
		// Watch the directory before the file exists, so that no
		// release between the two is missed.
		if w.watcher, err = watchDir(dir, w.notify, w.notifyAll); err != nil {
			w.watcher = nil
			if errors.Is(err, errors.ErrUnsupported) {
				w.dirErr = err
			}
			w.mu.Unlock()
			return nil, nil, err
		}
	}
	if w.watchers == nil {
		w.watchers = make(map[string][]chan struct{})
	}
	w.watchers[file] = append(w.watchers[file], ch)
	w.mu.Unlock()
	stop := func() { w.unwatch(file, ch) }
	// Opening read-only creates the file without a write event.
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		stop()
		return nil, nil, err
	}
	f.Close()
	return ch, stop, nil
}

func (w *wakeFiles) unwatch(file string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	chs := slices.DeleteFunc(w.watchers[file], func(c chan struct{}) bool { return c == ch })
	if len(chs) == 0 {
		delete(w.watchers, file)
		return
	}
	w.watchers[file] = chs
	select {
	case <-ch:
		// ch was woken but its waiter left: pass the wake-up on.
		wakeFirst(chs)
	default:
	}
}

// notify wakes the watchers of file. Of a wake file's, it wakes the
// longest waiting one that has no wake-up pending: one per Locker and
// release, rather than a crowd whose attempts would queue for SQLite's
// write lock. A woken waiter that does not get the name waits again in
// its place; one that leaves passes its wake-up on (see unwatch). A change
// file's watchers (observers) are all woken.
func (w *wakeFiles) notify(file string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.HasSuffix(file, changeSuffix) {
		wakeAll(w.watchers[file])
		return
	}
	wakeFirst(w.watchers[file])
}

// wakeFirst wakes the first of chs without a wake-up pending.
func wakeFirst(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
			return
		default:
		}
	}
}

// notifyAll wakes every watcher.
func (w *wakeFiles) notifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chs := range w.watchers {
		wakeAll(chs)
	}
}

func wakeAll(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// released tells name's waiters and observers, in every process, that it
// may be free.
func (w *wakeFiles) released(ctx context.Context, name string) {
	file := w.wakeFile(name)
	w.touch(ctx, file)
	w.touch(ctx, file+changeSuffix)
}

// touch opens file in the wake directory for writing and closes it, which
// wakes its watchers. Without a file nobody watches. Errors are ignored:
// watchers then find out by polling.
func (w *wakeFiles) touch(ctx context.Context, file string) {
	dir, err := w.directory(ctx)
	if err != nil {
		return
	}
	if f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0); err == nil {
		f.Close()
	}
}

func (w *wakeFiles) close() {
	w.mu.Lock()
	w.closed = true
	watcher := w.watcher
	w.watcher = nil
	w.mu.Unlock()
	if watcher != nil {
		watcher.close()
	}
}

// Resume moves l's hold to another owner and tells the name's observers.
func (d *sqliteDriver) Resume(ctx context.Context, from, to driver.Lease) (driver.Result, error) {
	res, err := d.sqlDriver.Resume(ctx, from, to)
	if err == nil {
		d.wakes.touch(ctx, d.wakes.wakeFile(from.Name)+changeSuffix)
	}
	return res, err
}
