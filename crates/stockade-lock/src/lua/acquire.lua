-- Acquire a lock and draw a fencing token, atomically.
--
-- KEYS[1], KEYS[2]  the lock key and the fencing counter (see queue.lua)
-- ARGV[1]  the owner token (128 random bits, hex)
-- ARGV[2]  the lease in milliseconds
-- ARGV[3]  '1': draw the token with the clock floor (draw_fence in queue.lua);
--          '0' (Redlock): INCR the counter, seeding it from the clock when it
--          is missing. Redlock nodes are independent primaries, never failed
--          over to a replica, and their counters are kept in step by
--          raise_fence.lua, which the clock floor would only blur.
--
-- Returns {1, fence, now_us} when the lock was taken.
-- Returns {0, pttl, now_us}  when someone else holds it: pttl is the holder's
--                            remaining lease in milliseconds (-1: no expiry).
-- now_us is the server clock in microseconds (0 in Redlock mode), which lets
-- the client date the deadlines of its queue entries in the server's clock.
--
-- With '0', a missing counter (first use, or Redis lost its data) is seeded
-- from the server clock in microseconds, so tokens handed out after a data
-- loss are still larger than every token handed out before it, as long as the
-- server clock did not step back and the lock was taken fewer than a million
-- times a second.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] == '1' then
    local now_us = server_time_us()
    return {1, draw_fence(now_us), now_us}
  end
  local fence = redis.call('INCR', KEYS[2])
  if fence == 1 then
    local seed = server_time_us()
    redis.call('SET', KEYS[2], decimal(seed))
    fence = seed
  end
  return {1, fence, 0}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  return {0, pttl, server_time_us()}
end
return {0, pttl, 0}
