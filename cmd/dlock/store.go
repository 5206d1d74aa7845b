package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// defaultConnectTimeout bounds how long dlock waits for a store to answer
// when it connects.
const defaultConnectTimeout = 5 * time.Second

// store is the store a command uses: its URL (with any $DLOCK_PASSWORD
// filled in, never printed) and that URL redacted, for messages.
type store struct {
	url, shown string
	isDefault  bool   // the per-user SQLite file
	path       string // the default store's file, if isDefault
	base       string // the existing directory path is below, if isDefault: see defaultStorePath
}

// chooseStore returns the store the user chose (--store, else
// $DLOCK_STORE), or the default one. It checks the URL's form without
// contacting anything; the error is a usage error.
func chooseStore(cmd *cobra.Command) (store, error) {
	raw, _ := cmd.Flags().GetString("store")
	if raw == "" {
		raw = os.Getenv("DLOCK_STORE")
	}
	if raw == "" {
		path, base, err := defaultStorePath()
		if err != nil {
			return store{}, usageError{err}
		}
		u := "sqlite://" + filepath.ToSlash(path)
		return store{url: u, shown: u, isDefault: true, path: path, base: base}, nil
	}
	s := store{url: raw, shown: backend.RedactURL(raw)}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// dlock.Open says what is wrong, without the password, and
		// contacts nothing.
		_, err := dlock.Open(context.Background(), raw)
		return store{}, badURL(s, err)
	}
	if _, has := u.User.Password(); !has && u.Host != "" {
		// The password stays out of the command line and of the
		// command's environment: the library never reads it.
		if pass := os.Getenv("DLOCK_PASSWORD"); pass != "" {
			u.User = url.UserPassword(u.User.Username(), pass)
			s.url = u.String()
		}
	}
	return s, nil
}

// withTTLSession returns the store URL raw with, for a zk:// URL that has
// no session_timeout, session_timeout set to ttl: on ZooKeeper a dead
// holder's lock goes when its session expires, so this makes --ttl what
// governs takeover there as on every other store. The server bounds the
// timeout to [2, 20] tickTimes (4 s to 40 s by default) and the client
// takes the one it grants. Other URLs are returned as they are.
func withTTLSession(raw string, ttl time.Duration) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "zk" {
		return raw
	}
	q := u.Query()
	if q.Has("session_timeout") {
		return raw
	}
	q.Set("session_timeout", ttl.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// defaultStorePath is the default store's file,
// $XDG_STATE_HOME/dlock/locks.db, else ~/.local/state/dlock/locks.db, and
// its base: $XDG_STATE_HOME, else the home directory, which dlock never
// creates (see makeStoreDir).
func defaultStorePath() (path, base string, err error) {
	if base = os.Getenv("XDG_STATE_HOME"); base != "" {
		return filepath.Join(base, "dlock", "locks.db"), base, nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", "", errors.New("no --store, no $DLOCK_STORE, and no home directory (nor $XDG_STATE_HOME) for the default store: give a store with --store URL")
	}
	return filepath.Join(home, ".local", "state", "dlock", "locks.db"), home, nil
}

// makeStoreDir creates the directory of the default store s below its
// base, which must exist: a system user's home that does not exist
// (Debian's /nonexistent) is there so that nothing is created in it, and
// dlock, even as root, does not create it or its parents. Without the
// base, the error is a usage error that says how to give a store.
func makeStoreDir(s store) error {
	if fi, err := os.Stat(s.base); err != nil || !fi.IsDir() {
		what := "$HOME"
		if os.Getenv("XDG_STATE_HOME") != "" {
			what = "$XDG_STATE_HOME"
		}
		return usageError{fmt.Errorf("no store: the default store would be %s, but %s (%s) does not exist, and dlock does not create it; give a store with --store URL or $DLOCK_STORE, or set $XDG_STATE_HOME to an existing directory", s.path, what, s.base)}
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fail(exitStore, "cannot create the default store's directory: %v", err)
	}
	return nil
}

// describeDefaultStore is the default store for --help: its real path, or
// why there is none.
func describeDefaultStore() string {
	path, _, err := defaultStorePath()
	if err != nil {
		return "none: no home directory"
	}
	return "sqlite://" + filepath.ToSlash(path)
}

// connect opens s within timeout (and ctx). A URL the backend rejects is a
// usage error (exit 64; backends check URLs before connecting); a store
// that does not answer in time or fails is exit 74, with one line naming
// it. The bound holds even if a client library does not honour ctx: the
// Open is then left behind, and closed if it ever succeeds.
func connect(ctx context.Context, s store, timeout time.Duration) (*dlock.Locker, error) {
	if s.isDefault {
		if err := makeStoreDir(s); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type opened struct {
		l   *dlock.Locker
		err error
	}
	ch := make(chan opened, 1)
	go func() { // exits when Open returns
		l, err := dlock.Open(ctx, s.url)
		ch <- opened{l, err}
	}()
	var o opened
	select {
	case o = <-ch:
	case <-ctx.Done():
		// Backends honour ctx, and their error says why they could not
		// connect (refused, no such host): give them a moment to say it.
		grace := time.NewTimer(openGrace)
		defer grace.Stop()
		select {
		case o = <-ch:
		case <-grace.C:
			go func() { // exits when the abandoned Open returns
				if o := <-ch; o.err == nil {
					o.l.Close()
				}
			}()
			o.err = context.Cause(ctx)
		}
	}
	switch {
	case o.err == nil:
		return o.l, nil
	case errors.Is(o.err, dlock.ErrBadURL):
		return nil, badURL(s, o.err)
	case context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return nil, o.err // a signal: the caller says which
	case ctx.Err() != nil:
		return nil, storeError(s, fmt.Errorf("no answer within %v: %w", timeout, openCause(o.err)))
	}
	return nil, storeError(s, openCause(o.err))
}

// openGrace is how long connect waits, after its timeout, for dlock.Open
// to return its own error before it gives up on it.
const openGrace = 200 * time.Millisecond

// badURL is the usage error for a store URL that dlock.Open rejects.
func badURL(s store, err error) error {
	msg := strings.TrimPrefix(plain(openCause(err).Error()), "bad store URL: ")
	return usageError{fmt.Errorf("bad store URL %s: %s", s.shown, msg)}
}

// openCause drops dlock.Open's "open URL:" wrapping, which would name the
// store a second time.
func openCause(err error) error {
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "dlock: open ") {
		return inner
	}
	return err
}

// storeError is the one line and exit status 74 for a store that cannot
// be reached, or 77 for one that refused the credentials.
func storeError(s store, err error) error {
	if st := refusal(s, err); st != nil {
		return st
	}
	return fail(exitStore, "cannot reach store %s: %s", s.shown, plain(err.Error()))
}

// storeFailed is the one line and exit status 74 for a store that failed
// a step, or 77 for one that refused it (a missing grant or ACL).
func storeFailed(s store, err error) error {
	if st := refusal(s, err); st != nil {
		return st
	}
	return fail(exitStore, "store %s failed: %s", s.shown, plain(err.Error()))
}

// refusal is exit status 77 for a store that refused the credentials or a
// step, 73 for one out of space, or nil for any other error.
func refusal(s store, err error) error {
	switch {
	case errors.Is(err, dlock.ErrDenied):
		return fail(exitDenied, "store %s denied access: %s", s.shown, plain(err.Error()))
	case errors.Is(err, dlock.ErrNoSpace):
		return fail(exitNoSpace, "store %s is out of space and refuses writes: %s", s.shown, plain(err.Error()))
	}
	return nil
}

// childEnv returns the environment for a command dlock starts: this
// process's, without the store's secrets.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "DLOCK_PASSWORD" {
			continue
		}
		if k == "DLOCK_STORE" && backend.RedactURL(v) != v {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
