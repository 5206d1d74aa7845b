package luascript_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

func TestNewFillsPlaceholders(t *testing.T) {
	fsys := parts
	s, err := luascript.New(fsys, map[string]string{"x": "7", "y": "why"}, "a.lua", "b.lua")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// a.lua gets the newline it lacks, so b.lua starts on a line of its own.
	want := "local x = 7\nlocal y = 'why'\nreturn x + 7\n"
	if got := s.Source(); got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
	if got := strings.Join(s.Files(), ","); got != "a.lua,b.lua" {
		t.Errorf("Files() = %s, want a.lua,b.lua", got)
	}
}

func TestNewRefusesBadSource(t *testing.T) {
	fsys := parts
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		files []string
		want  string
	}{
		{"NoFiles", nil, nil, "no files"},
		{"Missing", nil, []string{"none.lua"}, "none.lua"},
		{"NoValue", nil, []string{"x.lua"}, "x.lua: placeholder {{x}} has no value"},
		{"Unused", map[string]string{"x": "1", "z": "2"}, []string{"x.lua", "plain.lua"}, "{{z}} used by none"},
		{"Newline", map[string]string{"x": "1\n2"}, []string{"x.lua"}, "holds a newline"},
		{"Stray", nil, []string{"plain.lua", "stray.lua"}, `stray.lua:2: "{{" is not a placeholder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := luascript.New(fsys, tc.vars, tc.files...)
			if !errors.Is(err, luascript.ErrSource) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v, want an ErrSource naming %q", s, err, tc.want)
			}
		})
	}
}

func TestMustPanicsOnError(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Must with an error did not panic")
		}
	}()
	luascript.Must(luascript.New(parts, nil, "none.lua"))
}
