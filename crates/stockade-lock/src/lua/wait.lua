-- A queued waiter checks on its place (the first check when it found itself
-- alone in the queue, then a bounded re-check in case its grant message was
-- lost or its holder's lease ran out), and renews its entry's deadline.
--
-- KEYS[1..3]  the lock key, the fencing counter, the queue (see queue.lua)
-- ARGV[1]  the waiter's owner token
-- ARGV[2]  the prefix of the waiters' grant channels (see grant_next)
-- ARGV[3]  the waiter's entry as it was queued
-- ARGV[4]  the same entry with a renewed deadline
--
-- Returns {2, fence, now_us}            the lock was already granted to the
--                                       waiter (its message went missing)
--         {1, fence, now_us}            the lock was free and is granted to
--                                       the waiter now (it was first in line)
--         {0, pttl, now_us, requeued}   still waiting; pttl is the holder's
--                                       remaining lease (-2: nobody holds it),
--                                       requeued 1 when the entry was gone
--                                       (dropped as dead) and was queued again
--                                       at the back.
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  return {2, tonumber(redis.call('GET', KEYS[2]) or '0'), server_time_us()}
end
local requeued = 0
local at = redis.call('LPOS', KEYS[3], ARGV[3])
if at then
  if ARGV[3] ~= ARGV[4] then
    redis.call('LSET', KEYS[3], at, ARGV[4])
  end
else
  redis.call('RPUSH', KEYS[3], ARGV[4])
  requeued = 1
end
if not owner then
  -- Nobody holds it (the holder's lease ran out, or we are alone in the
  -- queue and it was released before we queued): hand it to the first live
  -- waiter, which may be us.
  local granted = grant_next(ARGV[2], ARGV[1])
  if granted and granted[1] == ARGV[1] then
    return {1, granted[2], granted[3]}
  end
end
return {0, redis.call('PTTL', KEYS[1]), server_time_us(), requeued}
