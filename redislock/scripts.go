package redislock

import (
	"embed"
	"strconv"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// The scripts are Lua files in lua/, each with the comment that explains
// it: value.lua encodes and decodes an exclusive holder's value,
// common.lua holds the layout of a name's keys and the helpers of the
// general paths, acquire.lua, release.lua and the others a script's own
// part. A script's error names the file and line it comes from (see
// package luascript).
//
//go:embed lua/*.lua
var lua embed.FS

// commonVars are the values of the placeholders of common.lua and of the
// fast paths that stand in for its helpers (queue_fast.lua,
// release_handoff.lua): the constants the scripts share with this
// package, in ms.
var commonVars = map[string]string{
	"grant_ms": strconv.FormatInt(grantLease.Milliseconds(), 10),
	"queue_ms": strconv.FormatInt(queueTTL.Milliseconds(), 10),
	"fresh_ms": strconv.FormatInt(freshGrant.Milliseconds(), 10),
}

// acquireScript takes a name, queues for it or re-enters it
// (lua/acquire.lua). Two paths return before the helpers of the general
// case are defined: the uncontended acquire, which takes a free name
// nobody waits for (lua/acquire_fast.lua), and the queued acquire, which
// puts an exclusive waiter in line behind another exclusive holder
// (lua/queue_fast.lua).
var acquireScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/value.lua", "lua/acquire_fast.lua", "lua/queue_fast.lua", "lua/common.lua", "lua/acquire.lua"))

// refreshScript extends an owner's lease (lua/refresh.lua).
var refreshScript = luascript.Must(luascript.New(lua, nil, "lua/value.lua", "lua/refresh.lua"))

// releaseScript frees an owner's hold or takes a waiter out of the queue,
// handing the name on (lua/release.lua). Three paths return before the
// helpers of the general case are defined: the release of an exclusive
// holder that hands the name to a waiter of its own Locker's line
// (lua/release_local.lua, see lines), the release of an exclusive
// holder nobody waits behind (lua/release_fast.lua), and one that hands
// the name to a live exclusive waiter at the head of the queue
// (lua/release_handoff.lua).
var releaseScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/value.lua", "lua/owner_held.lua", "lua/release_local.lua", "lua/release_fast.lua", "lua/release_handoff.lua", "lua/common.lua", "lua/release.lua"))

// forceReleaseScript frees a name whatever its holders
// (lua/force_release.lua).
var forceReleaseScript = luascript.Must(luascript.New(lua, commonVars,
	"lua/value.lua", "lua/common.lua", "lua/force_release.lua"))

// inspectHashScript reads a name held shared or as a semaphore
// (lua/inspect_hash.lua).
var inspectHashScript = luascript.Must(luascript.New(lua, nil, "lua/inspect_hash.lua"))

// waitersScript counts a name's live queue entries (lua/waiters.lua).
var waitersScript = luascript.Must(luascript.New(lua, nil, "lua/waiters.lua"))

// resumeScript moves a hold to another owner, keeping its fence
// (lua/resume.lua).
var resumeScript = luascript.Must(luascript.New(lua, nil, "lua/value.lua", "lua/resume.lua"))

// scripts are every script of the package by name, for the test module.
var scripts = map[string]*luascript.Script{
	"acquire":      acquireScript,
	"refresh":      refreshScript,
	"release":      releaseScript,
	"forceRelease": forceReleaseScript,
	"inspectHash":  inspectHashScript,
	"fenceWrite":   fenceWriteScript,
	"waiters":      waitersScript,
	"resume":       resumeScript,
}
