package redlock_test

import (
	"testing"

	"github.com/dlock-go/dlock/internal/goredis/luascript/luascripttest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
)

// TestScriptsAssemble checks every script of redlock against a real server
// (see luascripttest.CheckScripts): no placeholder left, each compiles,
// and every file of redlock/lua is part of some script.
func TestScriptsAssemble(t *testing.T) {
	luascripttest.CheckScripts(t, testserver.StartRedis(t).Client(t), testhook.Scripts, "../lua", 6)
}
