-- A waiter gives up (its wait ran out, or its future was dropped): it leaves
-- the queue, and if the lock was granted to it in the meantime (the grant
-- raced its departure) it passes the lock on, so nothing is left held.
--
-- KEYS[1..3]  the lock key, the fencing counter, the queue (see queue.lua)
-- ARGV[1]  the waiter's owner token
-- ARGV[2]  the prefix of the waiters' grant channels (see grant_next)
-- ARGV[3]  the waiter's entry
-- ARGV[4]  the entry with a renewed deadline, if a renewal may be in flight
--          (else the same as ARGV[3])
--
-- Returns 1 when the waiter had been granted the lock (now handed on or
-- deleted), 0 otherwise.
redis.call('LREM', KEYS[3], 1, ARGV[3])
if ARGV[4] ~= ARGV[3] then
  redis.call('LREM', KEYS[3], 1, ARGV[4])
end
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  if not grant_next(ARGV[2], nil) then
    redis.call('DEL', KEYS[1])
  end
  return 1
end
if not owner then
  -- Nobody holds it: do not leave the others waiting for their re-check.
  grant_next(ARGV[2], nil)
end
return 0
