-- Acquire a lock and draw a fencing token, atomically.
--
-- KEYS[1]  the lock key, e.g. stockade-lock:{orders}
-- KEYS[2]  the fencing counter, e.g. stockade-lock:{orders}:fence (same hash tag)
-- ARGV[1]  the owner token (128 random bits, hex)
-- ARGV[2]  the lease in milliseconds
--
-- Returns {1, fence} when the lock was taken: fence is the counter after INCR.
-- Returns {0, pttl}  when someone else holds it: pttl is the holder's remaining
--                    lease in milliseconds (-1 if the key has no expiry).
--
-- The counter never goes down. If it is missing (first use, or Redis lost its
-- data) it is seeded from the server clock in microseconds, so tokens handed out
-- after a data loss are still larger than every token handed out before it, as
-- long as the server clock did not step back and the lock was taken fewer than
-- a million times a second.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('INCR', KEYS[2])
  if fence == 1 then
    -- The counter was missing: seed it from the clock instead.
    local now = redis.call('TIME')
    local seed = now[1] .. string.format('%06d', tonumber(now[2]))
    redis.call('SET', KEYS[2], seed)
    fence = tonumber(seed)
  end
  return {1, fence}
end
return {0, redis.call('PTTL', KEYS[1])}
