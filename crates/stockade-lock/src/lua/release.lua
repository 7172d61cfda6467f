-- Release a lock if, and only if, the caller still owns it, handing it
-- straight to the next live waiter.
--
-- KEYS[1..3]  the lock key, the fencing counter, the queue (see queue.lua)
-- ARGV[1]  the owner token the caller acquired the lock with
-- ARGV[2]  where to publish: the prefix of the waiters' grant channels
--          ('queue', see grant_next), or the lock's channel ('announce')
-- ARGV[3]  'queue': grant the lock to the first live waiter of the queue (the
--          single-node hand-off), or delete it if there is none;
--          'announce' (Redlock): delete it and PUBLISH 'released' so that
--          the waiters, who poll by majority, try again.
--
-- Returns 1 when the lock was ours (and is now deleted or handed on), 0 when
-- it was not ours (expired, or taken by someone else): another holder's lock
-- is never touched.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[3] == 'announce' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
elseif not grant_next(ARGV[2], nil) then
  redis.call('DEL', KEYS[1])
end
return 1
