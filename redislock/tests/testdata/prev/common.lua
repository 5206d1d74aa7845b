-- common.lua: the Lua helpers the general paths of redislock's scripts
-- share. Go fills the placeholders with redislock's constants grantLease,
-- queueTTL and freshGrant, in ms.
--
-- Keys of one name, all sharing the name's hash tag (see Key):
--
--   K  = Key(prefix, name)  a string while the name is free or held
--                           exclusively: owner|fence.ttl.n[,qexp][|metadata]
--                           while held (ttl: the holder's lease in ms;
--                           n: a renewal counter, one more at every
--                           renewal, so that owner|fence.ttl.n, the
--                           stamp, changes whenever the lease is written;
--                           the key lives ttl + the clock bound, see
--                           "Clock steps" in the package documentation;
--                           qexp: until when, at least, the
--                           queue lives, server clock, ms; written when
--                           the name was handed on from the queue, see
--                           queue_alive), |fence as a tombstone after
--                           release; a hash
--                           while it is held in shared mode or as a
--                           semaphore: owner -> "expiry_ms|fence|metadata"
--                           per holder (expiry on the server's clock), plus
--                           "f" -> the last fence issued and "m" -> the
--                           mode ("s" shared, or the semaphore's limit)
--   Q  = K + ":q"           list of waiters, first come first served, one
--                           entry each: owner|ticket|ttl_ms|written_ms|
--                           keep_ms|qexp|mode|metadata: the waiter's lease
--                           length, when it last wrote the entry (server
--                           clock), how long the entry lives unless
--                           rewritten, until when the queue lived at least
--                           then (see queue_alive), and its mode ("x"
--                           exclusive, "s" shared, or a limit); ticket: see
--                           grant
--
-- Owners never contain '|' and always contain ':', so no owner is "f" or
-- "m". The hash's own expiry is raised to its latest holder's, so a hash
-- whose holders all expired disappears like an expired string; when its
-- last holder leaves it becomes the tombstone |fence, so tokens keep
-- increasing whatever mode the name is taken in next.
--
-- The exclusive scripts read K with redis.pcall('GET'): on a hash that
-- fails with WRONGTYPE, which sends them to the multi-holder logic, so a
-- name never used in shared or semaphore mode runs exactly the commands
-- it ran before those modes existed.
--
-- A name freed (wholly or in part) while owners wait is handed on the
-- server, in the same script, to as many queue entries from the head as
-- fit: one exclusive entry when nobody holds, every shared entry up to
-- the first exclusive one while no exclusive holder holds, permits while
-- fewer than the limit hold. Each is told on the channel ARGV chanp ..
-- <locker id> with payload owner|fence|ticket. An entry with a ticket
-- written less than fresh_ms (freshGrant) ago gets its TTL, and its waiter
-- takes the message as the grant (the entry was written by the call with
-- that ticket, so the lease began after that call was sent); the others
-- get a lease of at most grant_ms (grantLease) and ticket 0, and their
-- waiter runs the acquire script, which finds it a holder and extends the
-- lease to its own TTL.
--
-- The server's TIME is read only when needed (and once per script): for
-- every new token (see fence_after), for the expiries of shared holds and
-- permits, and for queue deadlines when someone waits.
--
-- A name's state is a table st: last (the last fence issued), n (live
-- holders), mode ("x" for an exclusive holder, "s" shared, a limit, nil
-- when n is 0), owner and fence (the exclusive holder), hs (the other
-- holders by owner: exp, fence, metadata), minexp (their earliest
-- expiry), glease (the shortest lease granted by this script); for an
-- exclusive holder also ttl (its lease, ms; 0 in a value written before
-- values recorded it), rn (its renewal counter), stamp (the value up to
-- the counter) and rest (what follows it: ",qexp" and "|metadata").
--
-- The clock bound (ms) is every script's last argument: an exclusive
-- key lives its holder's TTL plus the bound, a shared holder or permit
-- counts as live until its expiry plus the bound, by the server's clock.
local bound_ms = tonumber(ARGV[#ARGV])
local grant_ms = {{grant_ms}}
local queue_ms = {{queue_ms}}
local fresh_ms = {{fresh_ms}}
local us_cache
local function now_us()
  if not us_cache then
    local t = redis.call('TIME')
    us_cache = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return us_cache
end
local function now_ms() return math.floor(now_us() / 1000) end
local function num(x) return string.format('%.0f', x) end
-- fence_after returns the next token: above last, and no lower than the
-- server's TIME in microseconds, so that tokens stay above TIME-based
-- ones even when the last writes were lost.
local function fence_after(last)
  return num(math.max(last + 1, now_us()))
end
local function put(K, owner, fence, meta, ttl, qexp)
  local val = owner .. '|' .. fence .. '.' .. num(ttl) .. '.0'
  if qexp then val = val .. ',' .. num(qexp) end
  if meta ~= '' then val = val .. '|' .. meta end
  redis.call('SET', K, val, 'PX', ttl + bound_ms)
end
-- renew extends the exclusive holder's lease to ttl, counting the renewal.
local function renew(K, st, ttl)
  redis.call('SET', K, st.owner .. '|' .. st.fence .. '.' .. num(ttl) .. '.' .. num(st.rn + 1) .. st.rest, 'PX', ttl + bound_ms)
end
-- load returns the state of K, whose GET (through pcall) returned v, or
-- nil if K holds a value dlock did not write. It drops expired holders.
local function load(K, v)
  local st = {last = 0, n = 0, hs = {}}
  if type(v) == 'table' then
    local now = now_ms()
    local all = redis.call('HGETALL', K)
    for i = 1, #all, 2 do
      local k, val = all[i], all[i + 1]
      if k == 'f' then
        st.last = tonumber(val)
      elseif k == 'm' then
        st.mode = val
      else
        local exp, f, meta = string.match(val, '^(%d+)|(%d+)|(.*)$')
        exp = tonumber(exp)
        if exp and exp + bound_ms > now then
          st.hs[k] = {exp = exp, fence = f, meta = meta}
          st.n = st.n + 1
          if not st.minexp or exp < st.minexp then st.minexp = exp end
        else
          redis.call('HDEL', K, k)
        end
      end
    end
    if st.n == 0 then st.mode = nil end
  elseif v then
    local o, f, ttl, rn, pos = string.match(v, '^([^|]*)|(%d+)%.?(%d*)%.?(%d*)()')
    if not o then return nil end
    st.last = tonumber(f)
    st.qexp = tonumber(string.match(v, '^,(%d+)', pos))
    if o ~= '' then
      st.n, st.mode, st.owner, st.fence = 1, 'x', o, f
      st.ttl, st.rn = tonumber(ttl) or 0, tonumber(rn) or 0
      st.stamp, st.rest = string.sub(v, 1, pos - 1), string.sub(v, pos)
    end
  end
  return st
end
-- kind is what modes must agree on: "L" for a lock, else the limit.
local function kind(mode)
  if mode == 'x' or mode == 's' then return 'L' end
  return mode
end
local function compatible(st, mode) return st.n == 0 or kind(st.mode) == kind(mode) end
-- fits reports whether the holders leave room for one more of mode.
local function fits(st, mode)
  if st.n == 0 then return true end
  if mode == 'x' or st.mode == 'x' then return false end
  if mode == 's' then return st.mode == 's' end
  return st.mode == mode and st.n < tonumber(mode)
end
-- add makes owner a holder of mode with a lease of ms and returns its
-- fence, above every earlier one.
local function add(K, st, owner, mode, meta, ms, qexp)
  local f = fence_after(st.last)
  st.last = tonumber(f)
  if mode == 'x' then
    put(K, owner, f, meta, ms, qexp)
    st.owner, st.fence = owner, f
  else
    if st.n == 0 then redis.call('DEL', K) end
    local exp = now_ms() + ms
    redis.call('HSET', K, owner, num(exp) .. '|' .. f .. '|' .. meta, 'f', f, 'm', mode)
    if redis.call('PTTL', K) < ms + bound_ms then redis.call('PEXPIRE', K, ms + bound_ms) end
    st.hs[owner] = {exp = exp, fence = f, meta = meta}
    if not st.minexp or exp < st.minexp then st.minexp = exp end
  end
  st.n, st.mode = st.n + 1, mode
  return f
end
local function tombstone(K, st, ms)
  redis.call('SET', K, '|' .. num(st.last), 'PX', ms)
end
-- A queue entry is "owner|ticket|ttl|written|keep|qexp|mode|metadata":
-- the waiter's ticket (the number of the call that wrote the entry, "0"
-- when its grants must be confirmed), lease length, when the entry was
-- written (server clock, ms), how long it lives without a rewrite, until
-- when (at least) the queue lived when it was written, and mode.
local function parse(e)
  local o, tk, ttl, w, keep, qx, mode, meta = string.match(e, '^([^|]*)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|([^|]*)|(.*)$')
  if not o then return nil end
  return {owner = o, ticket = tk, ttl = tonumber(ttl), w = tonumber(w), keep = tonumber(keep), qx = tonumber(qx), mode = mode, meta = meta, raw = e}
end
local function live(x) return x and x.w + x.keep >= now_ms() end
-- peek returns the queue's first live entry, dropping dead ones ahead of it.
local function peek(Q)
  while true do
    local e = redis.call('LINDEX', Q, 0)
    if not e then return nil end
    local x = parse(e)
    if live(x) then return x end
    redis.call('LPOP', Q)
  end
end
-- pop removes and returns the queue's first live entry (dropping dead
-- ones ahead of it); first is the head already popped by the caller, if any.
local function pop(Q, first)
  local e = first
  while true do
    if not e then e = redis.call('LPOP', Q) end
    if not e then return nil end
    local x = parse(e)
    if live(x) then return x end
    e = nil
  end
end
-- queue_alive makes sure the queue outlives for at least queue_ms / 2
-- more every entry that may join it without extending it itself (see
-- enqueue), and returns until when it lives at least: the later of
-- st.qexp, recorded in the holder's value by an earlier grant, and x.qx,
-- recorded in the entry x just taken from the queue, if still far enough
-- off; else now + queue_ms. A queue's expiry only moves later while it
-- exists, and a queue made again later expires later still, so a recorded
-- qexp stays a lower bound of the queue's expiry as long as the queue
-- exists.
local function queue_alive(Q, st, x)
  local now = now_ms()
  local q = math.max(st.qexp or 0, x.qx or 0)
  if q >= now + queue_ms / 2 and q <= now + queue_ms then return q end
  redis.call('PEXPIRE', Q, queue_ms)
  return now + queue_ms
end
-- grant hands the name to the queue's head entries while they fit, in
-- order, and returns {owner, fence, ticket, ...} of those it granted. Self (the
-- owner running the script) gets its own TTL and no message. The others
-- get a message on their Locker's channel, owner|fence|ticket (but not
-- those of the Locker near, which the script's caller tells itself), and
-- their TTL when their entry carries a ticket and was written less than
-- fresh_ms ago, so that the waiter may take the message as the grant;
-- else a lease of at most grant_ms and ticket 0, and the waiter confirms
-- it. first: see pop. An exclusive grant also keeps the queue alive (see
-- queue_alive) and records until when in the new holder's value.
local function grant(K, Q, st, chanp, self, first, near)
  local granted = {}
  while not (st.n > 0 and st.mode == 'x') do
    local x = pop(Q, first)
    first = nil
    if not x then break end
    if not compatible(st, x.mode) or not fits(st, x.mode) then
      redis.call('LPUSH', Q, x.raw)
      redis.call('PEXPIRE', Q, queue_ms)
      break
    end
    local h, lease, tk = x.owner, x.ttl, '0'
    if h ~= self then
      if x.ticket ~= '0' and now_ms() - x.w < fresh_ms then
        tk = x.ticket
      else
        lease = math.min(lease, grant_ms)
      end
    end
    local qexp
    if x.mode == 'x' then qexp = queue_alive(Q, st, x) end
    local f = add(K, st, h, x.mode, x.meta, lease, qexp)
    if h ~= self then
      local lk = string.match(h, '^[^:]*')
      if lk ~= near then redis.call('PUBLISH', chanp .. lk, h .. '|' .. f .. '|' .. tk) end
      st.glease = math.min(st.glease or lease, lease)
    end
    table.insert(granted, h)
    table.insert(granted, f)
    table.insert(granted, tk)
  end
  return granted
end
-- find returns the raw entry of owner in the queue and its index (from
-- 0), or nil.
local function find(Q, owner)
  local p = owner .. '|'
  for i, e in ipairs(redis.call('LRANGE', Q, 0, -1)) do
    if string.sub(e, 1, #p) == p then return e, i - 1 end
  end
end
-- enqueue puts owner at the tail of the queue, or, if known (it queued
-- before in this wait), rewrites its entry in place when still there. It
-- returns how many entries are queued ahead of it if it joined now, else
-- nil, and its place (0 at the head). The queue outlives every entry: it
-- is extended to queue_ms unless it existed already and the holder's
-- value records (st.qexp, see queue_alive) that it lives past this
-- entry's deadline (keep is at most 3 s).
local function enqueue(Q, st, owner, ticket, ttl, keep, mode, meta, known)
  local now = now_ms()
  local found, i
  if known then found, i = find(Q, owner) end
  -- qx: until when the queue lives at least, written into the entry
  -- (see queue_alive); a queue made by this RPUSH lives until now +
  -- queue_ms, which is no earlier.
  local qx, extend = st.qexp, false
  if not (qx and qx >= now + keep and qx <= now + queue_ms) then qx, extend = now + queue_ms, true end
  local e = owner .. '|' .. ticket .. '|' .. ttl .. '|' .. num(now) .. '|' .. keep .. '|' .. num(qx) .. '|' .. mode .. '|' .. meta
  local ahead
  if found then
    redis.call('LSET', Q, i, e)
  else
    ahead = redis.call('RPUSH', Q, e) - 1
    i = ahead
  end
  if extend or ahead == 0 then redis.call('PEXPIRE', Q, queue_ms) end
  return ahead, i
end
