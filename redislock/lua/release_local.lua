-- release_local.lua, the release script's second part, after
-- owner_held.lua: an exclusive holder's release that names a successor,
-- a waiter of the holder's own Locker (ARGV owner, tombstone ms, chanp,
-- successor, successor's lease ms, successor's metadata, clock bound
-- ms), hands the name to it in place: a new fence, the successor's lease
-- and metadata, the queue's recorded expiry kept (see queue_alive in
-- common.lua), the queue untouched. Returns {2, fence}. A caller that
-- does not hold the name goes on to the general release, which takes it
-- out of the queue if it waits there.
--
-- It is every handoff within a Locker, so it reads and writes the value
-- inline rather than with vparse and vpack (about 4 µs less per call on
-- redis 7.0, 10 µs before): the fence is the 7 bytes after the header byte that
-- follows owner|, and the reply's fence a number (Redis replies with
-- its integer part, exact below 2^53).
if held and #ARGV == 7 then
  local p = #ARGV[1] + 2
  local h = string.byte(v, p) or 0
  if h >= 72 and h <= 103 then
    local b1, b2, b3, b4, b5, b6, b7 = string.byte(v, p + 1, p + 7)
    local t = redis.call('TIME')
    local fn = math.max(((((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6) * 256 + b7) + 1, t[1] * 1000000 + t[2])
    local lease = tonumber(ARGV[5])
    local stamp
    if lease < 16777216 then
      -- vpack(ARGV[4], fn, lease, 0), without its loops and table.
      local r = fn
      local f7 = r % 256; r = (r - f7) / 256
      local f6 = r % 256; r = (r - f6) / 256
      local f5 = r % 256; r = (r - f5) / 256
      local f4 = r % 256; r = (r - f4) / 256
      local f3 = r % 256; r = (r - f3) / 256
      local f2 = r % 256
      local f1 = (r - f2) / 256
      local l3 = lease % 256
      local l2 = (lease - l3) / 256 % 256
      local l1 = (lease - l3 - l2 * 256) / 65536
      if l1 > 0 then
        stamp = string.char(88, f1, f2, f3, f4, f5, f6, f7, l1, l2, l3)
      elseif l2 > 0 then
        stamp = string.char(80, f1, f2, f3, f4, f5, f6, f7, l2, l3)
      else
        stamp = string.char(72, f1, f2, f3, f4, f5, f6, f7, l3)
      end
      stamp = ARGV[4] .. '|' .. stamp
    else
      stamp = vpack(ARGV[4], fn, lease, 0)
    end
    local val = stamp .. (string.match(v, '^,%d+', p + 8 + math.floor((h - 64) / 8) + (h - 64) % 8) or '')
    if ARGV[6] ~= '' then val = val .. '|' .. ARGV[6] end
    redis.call('SET', KEYS[1], val, 'PX', lease + tonumber(ARGV[#ARGV]))
    return {2, fn}
  end
end
