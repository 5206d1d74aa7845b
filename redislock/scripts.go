package redislock

import (
	"embed"
	"strconv"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// The scripts are Lua files in lua/, each with the comment that explains
// it: common.lua holds the layout of a name's keys and the helpers of the
// general paths, acquire.lua, release.lua and the others a script's own
// part. A script's error names the file and line it comes from (see
// package luascript).
//
//go:embed lua/*.lua
var lua embed.FS

// commonVars are the values of common.lua's placeholders: the constants
// the scripts share with this package, in ms.
var commonVars = map[string]string{
	"grant_ms": strconv.FormatInt(grantLease.Milliseconds(), 10),
	"queue_ms": strconv.FormatInt(queueTTL.Milliseconds(), 10),
	"fresh_ms": strconv.FormatInt(freshGrant.Milliseconds(), 10),
}

// acquireScript takes a name, queues for it or re-enters it
// (lua/acquire.lua); its fast path takes a free name nobody waits for
// before the helpers of the general case are defined.
var acquireScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/acquire_fast.lua", "lua/common.lua", "lua/acquire.lua"))

// refreshScript extends an owner's lease (lua/refresh.lua).
var refreshScript = luascript.Must(luascript.New(lua, nil, "lua/refresh.lua"))

// releaseScript frees an owner's hold or takes a waiter out of the queue,
// handing the name on (lua/release.lua); an exclusive holder nobody waits
// behind is done before the helpers of the general case are defined.
var releaseScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/owner_held.lua", "lua/release_fast.lua", "lua/common.lua", "lua/release.lua"))

// forceReleaseScript frees a name whatever its holders
// (lua/force_release.lua).
var forceReleaseScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/common.lua", "lua/force_release.lua"))

// inspectHashScript reads a name held shared or as a semaphore
// (lua/inspect_hash.lua).
var inspectHashScript = luascript.Must(luascript.New(lua, nil, "lua/inspect_hash.lua"))

// waitersScript counts a name's live queue entries (lua/waiters.lua).
var waitersScript = luascript.Must(luascript.New(lua, nil, "lua/waiters.lua"))

// scripts are every script of the package by name, for the test module.
var scripts = map[string]*luascript.Script{
	"acquire":      acquireScript,
	"refresh":      refreshScript,
	"release":      releaseScript,
	"forceRelease": forceReleaseScript,
	"inspectHash":  inspectHashScript,
	"fenceWrite":   fenceWriteScript,
	"waiters":      waitersScript,
}
