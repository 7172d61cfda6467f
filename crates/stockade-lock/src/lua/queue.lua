-- Shared functions, prepended to acquire.lua, release.lua, wait.lua and
-- leave.lua (see scripts.rs). Every script that uses them gets
--
-- KEYS[1]  the lock key, e.g. stockade-lock:{orders} (value: the owner token)
-- KEYS[2]  the fencing counter, e.g. stockade-lock:{orders}:fence
-- KEYS[3]  the queue of waiters, e.g. stockade-lock:{orders}:queue
--
-- (all three share the hash tag). The queue is a list in arrival order; each
-- entry is `deadline_us:lease_ms:client:token`: when the waiter counts as gone
-- (server clock, microseconds), the lease it wants, the id of its client (whose
-- grant channel, `<grants prefix><client>`, the grant is published on), and the
-- owner token it will hold the lock with. Waiters RPUSH themselves; grants LPOP.

-- The server clock in microseconds. Exact in a Lua number (below 2^53 until
-- the year 2255).
local function server_time_us()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

-- An integer as a decimal string: Lua 5.1 would print a large number in
-- exponent notation.
local function decimal(number)
  return string.format('%.0f', number)
end

-- Draws a fencing token: max(counter + 1, now_us), and stores it as the new
-- counter value. Why the clock floor: after a failover to a replica that had
-- not yet received the last increments, the counter is behind the tokens
-- already handed out, and counting on from it would hand them out again. Every
-- token drawn here is at most its drawing time in microseconds, plus the number
-- of tokens drawn within the same microsecond before it (each draw is its own
-- script run, so in practice none); a failover takes far longer than a
-- microsecond, so the first token drawn after it, at least the new server's
-- clock, is larger than every token drawn before it, as long as the servers'
-- clocks agree to within the failover time (NTP gives milliseconds) and no
-- clock stepped back by more than that. On one server the counter alone keeps
-- tokens strictly increasing whatever the clock does. One write in the usual
-- case: SET ... GET returns the previous value while storing the clock.
local function draw_fence(now_us)
  local previous = tonumber(redis.call('SET', KEYS[2], decimal(now_us), 'GET') or '0') or 0
  if previous >= now_us then
    -- The counter is ahead of the clock (tokens drawn within one microsecond,
    -- a clock that stepped back, or a counter raised by Redlock): count on.
    local fence = previous + 1
    redis.call('SET', KEYS[2], decimal(fence))
    return fence
  end
  return now_us
end

-- Hands the (free, or being released by its owner) lock to the first live
-- waiter of the queue: pops entries until one whose deadline has not passed,
-- makes it the owner with its own lease and a new fencing token, and tells it
-- with one PUBLISH (`token fence now_us`) on its client's grant channel,
-- `grants_prefix .. client`, unless it is `self_token`, the caller itself, who
-- learns it from the reply. Only that client hears the message: the other
-- clients with waiters queued are not woken by every hand-off. Entries of
-- waiters past their deadline (a process that died while queued) are dropped.
-- Returns {token, fence, now_us}, or nil when nobody live was queued (the lock
-- is then left as it was).
local function grant_next(grants_prefix, self_token)
  local now_us = nil
  while true do
    local entry = redis.call('LPOP', KEYS[3])
    if not entry then
      return nil
    end
    local deadline, lease, client, token = string.match(entry, '^(%d+):(%d+):(%x+):(%x+)$')
    if deadline then
      now_us = now_us or server_time_us()
      if tonumber(deadline) > now_us then
        local fence = draw_fence(now_us)
        redis.call('SET', KEYS[1], token, 'PX', lease)
        if token ~= self_token then
          redis.call('PUBLISH', grants_prefix .. client,
            token .. ' ' .. decimal(fence) .. ' ' .. decimal(now_us))
        end
        return {token, fence, now_us}
      end
    end
  end
end

