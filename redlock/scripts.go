package redlock

import (
	"embed"

	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// The scripts run on each master alone. Keys: L, the lock (value
// "owner|fence|metadata", the owner being the lease's owner, '#' and the
// attempt's number (see attemptOwner), fence 0 while an acquisition is still writing
// its token back); F, the name's high-water mark (the highest token
// written back on this master, kept for markTTL); E, the master's epoch
// ("run_id:µs", see lua/epoch.lua).
//
// They are Lua files in lua/, each with the comment that explains it:
// epoch.lua, owner_held.lua and raise_mark.lua are parts several scripts
// begin with, acquire.lua and the others a script's own part. A script's
// error names the file and line it comes from (see package luascript).
//
//go:embed lua/*.lua
var lua embed.FS

// acquireScript takes L for an attempt and returns a candidate token and
// the master's age (lua/acquire.lua).
var acquireScript = luascript.Must(luascript.New(lua, nil, "lua/epoch.lua", "lua/owner_held.lua", "lua/acquire.lua"))

// fenceScript writes an acquisition's token into L and F (lua/fence.lua).
var fenceScript = luascript.Must(luascript.New(lua, nil, "lua/owner_held.lua", "lua/raise_mark.lua", "lua/fence.lua"))

// refreshScript extends L, or re-creates it with its token
// (lua/refresh.lua).
var refreshScript = luascript.Must(luascript.New(lua, nil, "lua/owner_held.lua", "lua/raise_mark.lua", "lua/refresh.lua"))

// releaseScript deletes the owner's L and wakes the waiters
// (lua/release.lua).
var releaseScript = luascript.Must(luascript.New(lua, nil, "lua/owner_held.lua", "lua/release.lua"))

// releaseAnyScript is releaseScript for L set by any attempt of the
// owner's acquisition (lua/release_any.lua).
var releaseAnyScript = luascript.Must(luascript.New(lua, nil, "lua/release_any.lua"))

// forceReleaseScript deletes L whatever its owner (lua/force_release.lua).
var forceReleaseScript = luascript.Must(luascript.New(lua, nil, "lua/force_release.lua"))

// resumeScript moves L from one owner to another, keeping its token
// (lua/resume.lua).
var resumeScript = luascript.Must(luascript.New(lua, nil, "lua/resume.lua"))

// scripts are every script of the package by name, for the test module.
var scripts = map[string]*luascript.Script{
	"acquire":      acquireScript,
	"fence":        fenceScript,
	"refresh":      refreshScript,
	"release":      releaseScript,
	"releaseAny":   releaseAnyScript,
	"forceRelease": forceReleaseScript,
	"resume":       resumeScript,
}
