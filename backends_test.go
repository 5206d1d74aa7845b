package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/memlock"
)

// memOpen is a backend.OpenFunc that opens a Locker on a private memlock store,
// whatever the URL.
func memOpen(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	return memlock.New(nil)
}

// mustOpenOn opens rawURL on m, closing the Locker when the test ends.
func mustOpenOn(t *testing.T, m *dlock.URLMux, rawURL string) *dlock.Locker {
	t.Helper()
	l, err := m.Open(t.Context(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want a Locker", rawURL, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// registered returns the schemes m lists in the error of an Open of an
// unknown scheme ("registered: a, b"), nil when it says none is.
func registered(t *testing.T, m *dlock.URLMux) []string {
	t.Helper()
	_, err := m.Open(t.Context(), "unknown-scheme://x")
	if !errors.Is(err, dlock.ErrBadURL) {
		t.Fatalf("Open(unknown-scheme://x) = %v, want ErrBadURL", err)
	}
	_, list, ok := strings.Cut(err.Error(), "(registered: ")
	if !ok {
		return nil
	}
	return strings.Split(strings.TrimSuffix(list, ")"), ", ")
}

// TestURLMuxPrivate: the adversary is a registry that leaks, a private
// mux answering for the default one's schemes or the default one for a
// private mux's.
func TestURLMuxPrivate(t *testing.T) {
	var m dlock.URLMux // the zero value is ready
	if got := registered(t, &m); len(got) != 0 {
		t.Errorf("schemes of a zero URLMux = %v, want none", got)
	}
	_, err := m.Open(t.Context(), "mem://x")
	if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), `unknown scheme "mem" (no scheme is registered)`) {
		t.Errorf("Open(mem://x) on a private URLMux = %v, want ErrBadURL: unknown scheme, none registered", err)
	}
	m.Register("private", memOpen)
	if got := registered(t, &m); !slices.Equal(got, []string{"private"}) {
		t.Errorf("schemes = %v, want [private]", got)
	}
	mustOpenOn(t, &m, "private://x")
	if _, err := dlock.Open(t.Context(), "private://x"); !errors.Is(err, dlock.ErrBadURL) {
		t.Errorf("dlock.Open(private://x) = %v, want ErrBadURL: the scheme is only on a private URLMux", err)
	}
	if got := registered(t, dlock.DefaultURLMux()); slices.Contains(got, "private") {
		t.Errorf("the default URLMux's schemes = %v, which lists a private URLMux's scheme", got)
	}
	mustOpenOn(t, dlock.DefaultURLMux(), "mem://x")
	_, err = m.Open(t.Context(), "mem://x")
	if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), `unknown scheme "mem" (registered: private)`) {
		t.Errorf("Open(mem://x) on a private URLMux = %v, want ErrBadURL: unknown scheme (registered: private)", err)
	}
}

// TestURLMuxOpenError: the adversary is an OpenFunc whose error quotes the
// URL's password; the mux hides it and keeps the error's chain.
func TestURLMuxOpenError(t *testing.T) {
	var m dlock.URLMux
	m.Register("x", func(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
		p, _ := u.User.Password()
		return nil, fmt.Errorf("%w: password %s refused", dlock.ErrDenied, p)
	})
	_, err := m.Open(t.Context(), "x://u:s3cret@h")
	if want := "dlock: open x://u:xxxxx@h: denied by the store: password xxxxx refused"; !errors.Is(err, dlock.ErrDenied) || err.Error() != want {
		t.Errorf("Open(x://u:s3cret@h) = %v, want ErrDenied saying %q", err, want)
	}
}

// TestURLMuxRegisterPanics: the adversary is a programming error (a
// scheme registered twice, a nil OpenFunc), which must not pass unseen.
func TestURLMuxRegisterPanics(t *testing.T) {
	var m dlock.URLMux
	m.Register("x", memOpen)
	for _, tc := range []struct {
		what   string
		scheme string
		open   backend.OpenFunc
	}{
		{"a scheme twice", "x", memOpen},
		{"a nil OpenFunc", "y", nil},
		{"a scheme of the default URLMux twice", "mem", memOpen},
	} {
		mux := &m
		if tc.scheme == "mem" {
			mux = dlock.DefaultURLMux()
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%s) did not panic", tc.what)
				}
			}()
			mux.Register(tc.scheme, tc.open)
		}()
	}
	if got := registered(t, &m); !slices.Equal(got, []string{"x"}) {
		t.Errorf("schemes after the refused Registers = %v, want [x]", got)
	}
}

// TestURLMuxConcurrent: the adversary is the race detector, with
// Registers and Opens (which list the schemes) on one URLMux at once; every Register
// lands.
func TestURLMuxConcurrent(t *testing.T) {
	var m dlock.URLMux
	m.Register("base", memOpen)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { m.Register(fmt.Sprintf("s%d", i), memOpen) })
		wg.Go(func() {
			l, err := m.Open(t.Context(), "base://x")
			if err != nil {
				t.Errorf("Open(base://x) = %v, want a Locker", err)
				return
			}
			l.Close()
		})
		wg.Go(func() { m.Open(t.Context(), "unknown://x") }) // lists the schemes
	}
	wg.Wait()
	if got := registered(t, &m); len(got) != n+1 {
		t.Errorf("schemes = %v, want base and %d more", got, n)
	}
	for i := range n {
		mustOpenOn(t, &m, fmt.Sprintf("s%d://x", i))
	}
}
