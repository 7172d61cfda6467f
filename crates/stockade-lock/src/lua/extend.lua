-- Extend a lock's lease if, and only if, the caller still owns it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
-- ARGV[2]  the new lease in milliseconds, counted from now
--
-- Returns 1 when extended, 0 when the lock is gone or someone else's. A lock
-- that has expired is never brought back to life.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
