package redislock_test

import (
	"strings"
	"testing"
	"time"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 5s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// containsField reports whether a CLIENT LIST line has the field=value
// prefix f among its space-separated fields.
func containsField(line, f string) bool {
	for _, field := range strings.Fields(line) {
		if strings.HasPrefix(field, f) {
			return true
		}
	}
	return false
}
