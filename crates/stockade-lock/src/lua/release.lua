-- Release a lock if, and only if, the caller still owns it, and wake waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token the caller acquired the lock with
-- ARGV[2]  the lock's pub/sub channel, told about the release
--
-- Returns 1 when the lock was ours and is now deleted, 0 when it was not ours
-- (expired, or taken by someone else): another holder's lock is never touched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
