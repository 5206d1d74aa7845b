-- release_handoff.lua, the release script's third part, after
-- release_fast.lua: an exclusive holder's release whose popped queue head
-- (first) is a live exclusive waiter (the hot name's every release)
-- hands the name to it here, before common.lua's helpers are defined,
-- with the commands and the reply of release.lua's general path for that
-- case (see grant and queue_alive in common.lua): TIME, SET, PEXPIRE when
-- the queue may need it, PUBLISH unless the waiter is the releasing
-- Locker's. A dead or unreadable head (one without an owner, too), or
-- one that waits for a shared hold or a permit, goes on to the general
-- path (which then reads TIME again).
if held and first then
  local h, tk, lease, w, keep, qx, mode, meta = string.match(first, '^([^|]+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|([^|]*)|(.*)$')
  local last, pos = string.match(v, '^[^|]*|(%d+)%.?%d*%.?%d*()')
  if h and mode == 'x' and last then
    local t = redis.call('TIME')
    local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local now = math.floor(us / 1000)
    if tonumber(w) + tonumber(keep) >= now then
      local gms, qms, fms = {{grant_ms}}, {{queue_ms}}, {{fresh_ms}}
      -- Strings are reused where they are what the general path would
      -- format (times and leases written with '%.0f'): each number
      -- formatted costs a sprintf.
      local ls = lease
      lease = tonumber(lease)
      if tk == '0' or now - tonumber(w) >= fms then
        tk = '0'
        if lease > gms then lease, ls = gms, string.format('%.0f', gms) end
      end
      local vq = string.match(v, '^,(%d+)', pos)
      local q, qs = tonumber(qx), qx
      if vq and tonumber(vq) > q then q, qs = tonumber(vq), vq end
      if not (q >= now + qms / 2 and q <= now + qms) then
        redis.call('PEXPIRE', KEYS[2], qms)
        qs = string.format('%.0f', now + qms)
      end
      local f = string.format('%.0f', math.max(tonumber(last) + 1, us))
      local val = h .. '|' .. f .. '.' .. ls .. '.0,' .. qs
      if meta ~= '' then val = val .. '|' .. meta end
      redis.call('SET', KEYS[1], val, 'PX', lease + tonumber(ARGV[#ARGV]))
      local lk = string.match(h, '^[^:]*')
      if lk ~= string.match(ARGV[1], '^[^:]*') then redis.call('PUBLISH', ARGV[3] .. lk, h .. '|' .. f .. '|' .. tk) end
      return {1, h, f, tk}
    end
  end
end
