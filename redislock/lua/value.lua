-- value.lua: the exclusive holder's value, first part of every script
-- that reads or writes one (before the fast paths, which use it too).
--
-- A value written by this version is owner|H F T N, then what the holder
-- records besides (",qexp" and "|metadata", see common.lua): H one byte,
-- 64 + 8 × #T + #N (so 'H' to 'g', never a digit), F the fence in 7
-- bytes, T the lease in ms and N the renewal counter, each in as few
-- bytes as it needs (T at least one, N none while 0), all big-endian.
-- With an 11-character Locker id that is 28 bytes for a lease below
-- 65.5 s renewed fewer than 256 times (or below 4.6 h not yet renewed),
-- which Redis keeps in one 48-byte allocation (see DESIGN.md, "Memory").
--
-- Values of earlier versions, owner|fence.ttl.n in decimal (and
-- owner|fence before those recorded the lease), are still read: the
-- byte after the first '|' tells them apart (a digit there), so a lock
-- held by a Locker of an earlier version is held with the fence it
-- recorded. Those versions read this one's values as foreign (their
-- pattern wants a digit after the first '|'): they neither take nor
-- renew nor release such a name (see "Upgrading" in the package
-- documentation). Tombstones keep the earlier form, |fence in decimal,
-- which both read.
local function be(x, n)
  local b = {}
  for i = n, 1, -1 do
    b[i] = x % 256
    x = math.floor(x / 256)
  end
  return string.char(unpack(b))
end
local function blen(x)
  local n = 0
  while x >= 1 do
    n = n + 1
    x = math.floor(x / 256)
  end
  return n
end
local function unbe(s, i, n)
  local x = 0
  for k = i, i + n - 1 do x = x * 256 + string.byte(s, k) end
  return x
end
-- vpack returns the stamp part of a value: owner, fence, lease (ms) and
-- renewal counter, all numbers but owner.
local function vpack(owner, fence, ttl, n)
  local lt, ln = math.max(blen(ttl), 1), blen(n)
  return owner .. '|' .. string.char(64 + 8 * lt + ln) .. be(fence, 7) .. be(ttl, lt) .. be(n, ln)
end
-- vparse returns a value's owner ("" in a tombstone), fence, lease (0
-- when not recorded) and renewal counter, and the position of what
-- follows them; nil for a value dlock did not write.
local function vparse(v)
  local o, p = string.match(v, '^([^|]*)|()')
  if not o then return nil end
  local h = string.byte(v, p) or 0
  if h >= 72 and h <= 103 then
    local lt, ln = math.floor((h - 64) / 8), (h - 64) % 8
    local e = p + 8 + lt + ln
    if #v < e - 1 then return nil end
    return o, unbe(v, p + 1, 7), unbe(v, p + 8, lt), unbe(v, p + 8 + lt, ln), e
  end
  local f, ttl, rn, e = string.match(v, '^(%d+)%.?(%d*)%.?(%d*)()', p)
  if not f then return nil end
  return o, tonumber(f), tonumber(ttl) or 0, tonumber(rn) or 0, e
end
