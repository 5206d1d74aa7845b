package sessionlock_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

var (
	x  = sessionlock.Mode{}
	s  = sessionlock.Mode{Shared: true}
	p2 = sessionlock.Mode{Limit: 2}
	p3 = sessionlock.Mode{Limit: 3}
)

func TestPlace(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead []sessionlock.Mode
		m     sessionlock.Mode
		held  bool
		wait  []int
		mode  bool // ErrMode
	}{
		{"exclusive first", nil, x, true, nil, false},
		{"exclusive behind a reader", []sessionlock.Mode{s}, x, false, []int{0}, false},
		{"exclusive waits for the entry just before it", []sessionlock.Mode{s, s, x}, x, false, []int{2}, false},
		{"shared first", nil, s, true, nil, false},
		{"shared behind readers", []sessionlock.Mode{s, s}, s, true, nil, false},
		{"shared behind a waiting writer", []sessionlock.Mode{s, x, s}, s, false, []int{1}, false},
		{"shared waits for the nearest writer", []sessionlock.Mode{x, s, x, s, s}, s, false, []int{2}, false},
		{"permit among the first n", []sessionlock.Mode{p2}, p2, true, nil, false},
		{"permit waits for the n just before it", []sessionlock.Mode{p2, p2, p2}, p2, false, []int{1, 2}, false},
		{"lock behind a semaphore", []sessionlock.Mode{p2}, x, false, nil, true},
		{"semaphore behind a lock", []sessionlock.Mode{s}, p2, false, nil, true},
		{"semaphores of different limits", []sessionlock.Mode{p2}, p3, false, nil, true},
	} {
		held, wait, err := sessionlock.Place(c.ahead, c.m)
		if held != c.held || !slices.Equal(wait, c.wait) || errors.Is(err, driver.ErrMode) != c.mode || (err != nil) != c.mode {
			t.Errorf("%s: Place(%v, %v) = %v, %v, %v; want %v, %v, ErrMode %v", c.name, c.ahead, c.m, held, wait, err, c.held, c.wait, c.mode)
		}
	}
}

func TestHolding(t *testing.T) {
	for _, c := range []struct {
		q    []sessionlock.Mode
		want int
	}{
		{nil, 0},
		{[]sessionlock.Mode{x, x}, 1},
		{[]sessionlock.Mode{x, s}, 1},
		{[]sessionlock.Mode{s, s, x, s}, 2},
		{[]sessionlock.Mode{p2, p2, p2}, 2},
		{[]sessionlock.Mode{p3, p2, p3}, 1},
		{[]sessionlock.Mode{s, p2, s}, 1},
	} {
		if got := sessionlock.Holding(c.q); got != c.want {
			t.Errorf("Holding(%v) = %d, want %d", c.q, got, c.want)
		}
	}
}

func TestTag(t *testing.T) {
	for _, m := range []sessionlock.Mode{x, s, p2, {Limit: 1000}} {
		got, rest := sessionlock.ParseTag(m.Tag() + "AbC-_:1z")
		if got != m || rest != "AbC-_:1z" {
			t.Errorf("ParseTag(%q) = %v, %q; want %v, the owner", m.Tag()+"AbC-_:1z", got, rest, m)
		}
	}
	for _, name := range []string{"P0.o", "P-1.o", "Q.o", "Px.o"} {
		if got, _ := sessionlock.ParseTag(name); got != x {
			t.Errorf("ParseTag(%q) = %v, want exclusive (an unknown tag keeps others out)", name, got)
		}
	}
}
